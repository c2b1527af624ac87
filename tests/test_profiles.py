"""Production profiles as typed config: what loads, what is refused (one line, exit code 2), the defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.errors import ConfigError
from frugalrl.ops.profiles import (
    ClusterSettings,
    GpuResources,
    Resources,
    StageResources,
    load_profile,
    validate_profile,
)

from .conftest import REPO

TRAIN = {"config": "configs/cartpole-ppo.yaml", "model_name": "cartpole-policy"}
CLASS = {"cpu_request": "4", "cpu_limit": "8", "memory_request": "16G", "memory_limit": "32G", "timeout_s": 3600}
RACE = {"contenders": ["plain", "random-skip"], "cpu_budget_s": 5}


def _write(tmp_path, data) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "profiles").glob("*.yaml")))
def test_every_shipped_profile_loads_with_its_stages(name):
    profile = load_profile(name, REPO)
    assert profile.name == name
    for stage in (profile.train, profile.latent, profile.peft):
        if stage is not None:
            assert profile.stage_config(stage).tracking.log_model and profile.stage_text(stage)


def test_shipped_profiles_read_as_before():
    """The values the profiles set, typed: full's per-class resources, quick's tune stage, the default Secret."""
    full, quick = load_profile("full", REPO), load_profile("quick", REPO)
    gpu = full.resources.gpu
    assert (gpu.gpu_count, gpu.cpu_request, gpu.cpu_limit, gpu.memory_request, gpu.memory_limit, gpu.timeout_s) == (
        1, "4", "8", "16G", "32G", 172800,
    )  # fmt: skip
    cpu, light = full.resources.cpu, full.resources.light
    assert (cpu.cpu_request, cpu.memory_limit, cpu.timeout_s) == ("4", "16G", 86400)
    assert (light.cpu_request, light.memory_limit, light.timeout_s) == ("500m", "4G", 7200)
    assert quick.resources.gpu == Resources().gpu  # quick sets no GPU class: the default, never used
    assert full.cluster == quick.cluster == ClusterSettings()
    assert full.cluster.tracking_secret_name == "frugalrl-tracking"
    assert (quick.tune.workers, quick.tune.overrides) == (2, ["tuning.trials=4"])
    assert quick.peft is not None and quick.peft.adapted_name == "invertedpendulum-adapted"
    assert full.peft is not None and full.peft.adapted_name == "halfcheetah-policy-adapted"  # the default


def test_only_stages_whose_config_runs_on_a_gpu_are_on_the_gpu_pool():
    """full: the Breakout latent stage (device=auto on pixels) and nothing else; quick: nothing."""
    full, quick = load_profile("full", REPO), load_profile("quick", REPO)
    assert full.gpu_stages() == [full.latent]
    assert (full.pool(full.train), full.pool(full.latent), full.pool(full.peft)) == ("cpu", "gpu", "cpu")
    assert quick.gpu_stages() == []
    assert all(s.pool == "auto" for s in (full.train, full.latent, full.peft, quick.train, quick.latent, quick.peft))


@pytest.mark.parametrize(
    ("pool", "overrides", "resolved"),
    [
        ("auto", [], "cpu"),  # cartpole-ppo.yaml: device cpu
        ("auto", ["device=cuda"], "gpu"),
        ("auto", ["device=auto"], "cpu"),  # auto on a state vector: an MLP waits on its env, not on a GPU
        ("gpu", ["device=auto"], "gpu"),  # asked for, and the config can use one
        ("cpu", ["device=auto"], "cpu"),
    ],
)
def test_a_stage_pool_follows_its_config_unless_set(tmp_path, pool, overrides, resolved):
    stage = {**TRAIN, "pool": pool, "overrides": ["tracking.enabled=true", *overrides]}
    profile = load_profile(_write(tmp_path, {"name": "x", "stages": {"train": stage}}), REPO)
    assert profile.pool(profile.train) == resolved
    assert profile.gpu_stages() == ([profile.train] if resolved == "gpu" else [])


@pytest.mark.parametrize(
    ("pool", "device", "expected"),
    [
        ("gpu", "cpu", "stage train asks for a GPU (pool: gpu) but configs/cartpole-ppo.yaml runs on device cpu"),
        ("cpu", "cuda", "stage train runs on the CPU pool (pool: cpu) but configs/cartpole-ppo.yaml asks for device "
         "cuda"),
    ],
)  # fmt: skip
def test_a_pool_the_config_cannot_use_is_refused_at_load(tmp_path, pool, device, expected):
    stage = {**TRAIN, "pool": pool, "overrides": ["tracking.enabled=true", f"device={device}"]}
    with pytest.raises(ConfigError) as error:
        load_profile(_write(tmp_path, {"name": "x", "stages": {"train": stage}}), REPO)
    message = str(error.value)
    assert message.startswith("profile profile.yaml: ") and expected in message and "\n" not in message
    assert "device=auto" in message  # the fix


def test_defaults_are_on_the_model():
    profile = validate_profile({"name": "x"}, "x", REPO)
    assert profile.train is profile.latent is profile.peft is None and profile.gpu_stages() == []
    assert (profile.tune.workers, profile.tune.overrides) == (0, [])
    assert profile.resources == Resources() and profile.cluster == ClusterSettings()
    assert Resources().model_dump() == {
        "light": {"cpu_request": "500m", "cpu_limit": "1", "memory_request": "1G", "memory_limit": "2G",
                  "timeout_s": 3600},
        "cpu": {"cpu_request": "2", "cpu_limit": "2", "memory_request": "4G", "memory_limit": "8G",
                "timeout_s": 21600},
        "race": {"cpu_request": "1", "cpu_limit": "1", "memory_request": "2G", "memory_limit": "8G",
                 "timeout_s": 21600},
        "gpu": {"cpu_request": "4", "cpu_limit": "8", "memory_request": "16G", "memory_limit": "32G",
                "timeout_s": 86400, "gpu_count": 1},
        "gpu_node_selector": {"cloud.google.com/gke-nodepool": "gpu-pool"},
        "gpu_toleration": {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    }  # fmt: skip
    assert ClusterSettings().model_dump() == {
        "tracking_secret_name": "frugalrl-tracking", "artifact_secret_name": "", "image_pull_secret_name": "",
    }  # fmt: skip


def test_a_class_written_in_part_keeps_its_other_defaults(tmp_path):
    """``gpu: {gpu_count: 2}`` asks for two GPUs and keeps the class's requests, limits and deadline; the
    classes not written keep theirs, and so do the GPU pool's selector and toleration."""
    data = {"name": "x", "resources": {"gpu": {"gpu_count": 2}, "light": {"cpu_limit": 3, "timeout_s": 600}}}
    resources = load_profile(_write(tmp_path, data), REPO).resources
    defaults = Resources()
    assert resources.gpu == defaults.gpu.model_copy(update={"gpu_count": 2})
    assert resources.gpu.cpu_request == "4" and resources.gpu.memory_limit == "32G"
    assert resources.light == defaults.light.model_copy(update={"cpu_limit": "3", "timeout_s": 600})
    assert resources.cpu == defaults.cpu
    assert (resources.gpu_node_selector, resources.gpu_toleration) == (defaults.gpu_node_selector,
                                                                       defaults.gpu_toleration)  # fmt: skip
    empty = load_profile(_write(tmp_path, {"name": "x", "resources": {"cpu": {}}}), REPO).resources
    assert empty == defaults  # an empty class is the default class


def test_numbers_are_kubernetes_quantities():
    res = GpuResources.model_validate({"cpu_request": 0.5, "cpu_limit": 2, "memory_request": 8, "memory_limit": "8",
                                       "timeout_s": "600", "gpu_count": "2"})  # fmt: skip
    assert (res.cpu_request, res.cpu_limit, res.memory_request, res.gpu_count, res.timeout_s) == (
        "0.5",
        "2",
        "8",
        2,
        600,
    )
    fields = {"cpu_limit": "1", "memory_request": "1G", "timeout_s": 60}
    assert StageResources(cpu_request="500m", memory_limit="64Gi", **fields).cpu_request == "500m"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "x", "gpus": True}, "gpus: unknown key; allowed keys here: name, resources, cluster, stages"),
        ({"name": "x", "gpu": True}, "gpu: unknown key"),  # the old top-level flag: stages follow their configs now
        ({"name": "x", "resources": {"cpus": 4}}, "resources.cpus: unknown key; allowed keys here: light, cpu, "
         "race, gpu,"),
        ({"name": "x", "resources": {"gpu_count": 1}}, "resources.gpu_count: unknown key"),  # the old flat schema
        ({"name": "x", "stages": {"train": {**TRAIN, "model": "m"}}}, "stages.train.model: unknown key; allowed"),
        ({"name": "x", "stages": {"evaluate": {}}}, "stages.evaluate: unknown key; allowed keys here: race, train, "
         "tune,"),
        ({"name": "x", "stages": {"race": RACE}}, "stage race races the train stage's config, and the profile has no "
         "train stage; add one"),
        ({"name": "x", "stages": {"train": TRAIN, "race": {**RACE, "contenders": ["plain", "tiered"]}}},
         "stage race: contender tiered does not fit this config's learner (ppo)"),
        ({"name": "x", "stages": {"train": TRAIN, "race": {**RACE, "contenders": ["plain", "x=configs/a.yaml"]}}},
         "stage race: contender x=configs/a.yaml names another config file; in a profile the contenders are"),
        ({"name": "x", "stages": {"train": TRAIN, "race": {**RACE, "contenders": [
            "plain", "pivot", "p2:selection.kind=pivot;selection.settings.evaluator.hidden=[8]"]}}},
         "stage race: its contenders need different pretraining (pivot (pivot "),
        ({"name": "x", "stages": {"train": TRAIN, "race": {**RACE, "contenders": ["plain"]}}},
         "stages.race.contenders = ['plain']: List should have at least 2 items"),
        ({"name": "x", "stages": {"tune": {"workers": "two"}}}, "stages.tune.workers = 'two': Input should be a valid"),
        ({"name": "x", "stages": {"tune": {"workers": -1}}}, "stages.tune.workers = -1: Input should be greater than"),
        ({"name": "x", "stages": {"train": {**TRAIN, "pool": "tpu"}}}, "stages.train.pool = 'tpu': Input should be "
         "'auto'"),
        ({"name": "x", "resources": {"gpu": {**CLASS, "gpu_count": 0}}}, "resources.gpu.gpu_count = 0: Input should be "
         "greater than"),
        ({"name": "x", "resources": {"light": {**CLASS, "gpu_count": 1}}}, "resources.light.gpu_count: unknown key"),
        ({"name": "x", "resources": {"cpu": {**CLASS, "timeout_s": 5}}}, "resources.cpu.timeout_s = 5: Input should be "
         "greater than or equal to 60"),
        ({"name": "x", "resources": {"cpu": {"memory_limit": "lots"}}}, "resources.cpu.memory_limit = 'lots': not "
         "a Kubernetes memory"),  # a class written in part: its one value is still checked
        ({"name": "x", "resources": {"gpu": {"gpu_count": 0}}}, "resources.gpu.gpu_count = 0: Input should be "
         "greater than"),
        ({"name": "x", "resources": {"cpu": {"cpu_request": "4"}}}, "cpu_request 4 is above cpu_limit 2; raise the "
         "limit"),  # Kubernetes would refuse the pod when the step starts
        ({"name": "x", "resources": {"light": {"memory_request": "8G"}}}, "memory_request 8G is above memory_limit "
         "2G; raise the limit"),
        ({"name": "x", "resources": {"cpu": {**CLASS, "cpu_request": "four"}}}, "resources.cpu.cpu_request = 'four': "
         "not a Kubernetes CPU quantity"),
        ({"name": "x", "resources": {"light": {**CLASS, "memory_limit": "16 GB"}}}, "resources.light.memory_limit = "
         "'16 GB': not a Kubernetes memory"),
        ({"name": "x", "cluster": {"tracking_secret_name": "MLflow_Secret"}}, "cluster.tracking_secret_name = "
         "'MLflow_Secret': String should match pattern"),  # not a Kubernetes object name
        ({"name": "x", "cluster": {"secret": "s"}}, "cluster.secret: unknown key; allowed keys here: "
         "tracking_secret_name"),
        ({"name": "x", "stages": {"train": {"config": "configs/cartpole-ppo.yaml"}}},
         "stages.train.model_name: required key missing; add it"),
        ({"stages": {}}, "name: required key missing; add it"),
        ("- just a list", "top level must be a mapping of keys, got list"),
        ("name: [x", "not valid YAML at line 1, column 9; fix the syntax"),
    ],
)  # fmt: skip
def test_a_bad_profile_is_one_line_naming_the_key_and_the_fix(tmp_path, data, expected):
    with pytest.raises(ConfigError) as error:
        load_profile(_write(tmp_path, data), REPO)
    message = str(error.value)
    assert message.startswith("profile profile.yaml: ") and expected in message and "\n" not in message


def test_stage_config_problems_are_caught_at_load_time(tmp_path):
    latent_off = {"name": "x", "stages": {"latent": TRAIN}}
    with pytest.raises(ConfigError, match="uses configs/cartpole-ppo.yaml, whose rollout.kind is not latent"):
        load_profile(_write(tmp_path, latent_off), REPO)
    missing = {"name": "x", "stages": {"train": {**TRAIN, "config": "configs/nope.yaml"}}}
    with pytest.raises(ConfigError, match="config file not found"):
        load_profile(_write(tmp_path, missing), REPO)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ({"name": "x", "resources": {"gpu": 1}}, "resources.gpu = 1: Input should be a valid dictionary"),
        ({"name": "x", "stages": {"tune": {"workers": [2]}}}, "stages.tune.workers = [2]: Input should be a valid"),
        (None, "not found; known profiles: ['full', 'quick']"),
    ],
)
@pytest.mark.parametrize("command", ["compile", "run"])
def test_cli_profile_errors_are_one_line_with_exit_code_2(tmp_path, capsys, profile, expected, command):
    path = _write(tmp_path, profile) if profile is not None else str(tmp_path / "missing.yaml")
    args = ["pipeline", command, "--profile", path]
    args += ["-o", str(tmp_path / "p.yaml")] if command == "compile" else ["--root", str(tmp_path / "runs")]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()  # refused before kfp.local starts anything


def test_the_library_never_imports_kfp():
    code = "import sys, frugalrl.ops.profiles, frugalrl.config; sys.exit('kfp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    lines = (REPO / "src" / "frugalrl" / "ops" / "profiles.py").read_text().splitlines()
    assert not [line for line in lines if line.startswith(("import kfp", "from kfp"))]
