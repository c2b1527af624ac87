"""Production profiles as typed config: what loads, what is refused (one line, exit code 2), the defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.errors import ConfigError
from frugalrl.ops.profiles import Resources, load_profile, validate_profile

from .conftest import REPO

TRAIN = {"config": "configs/cartpole-ppo.yaml", "model_name": "cartpole-policy"}


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
    """The values the old hand parser produced, now typed: full's resources, quick's tune stage."""
    full, quick = load_profile("full", REPO), load_profile("quick", REPO)
    assert full.gpu and not quick.gpu
    res = full.resources
    assert (res.gpu_count, res.cpu_request, res.cpu_limit, res.memory_request, res.memory_limit) == (
        1, "4", "8", "16G", "32G",
    )  # fmt: skip
    assert (quick.tune.workers, quick.tune.overrides) == (2, ["tuning.trials=4"])
    assert quick.peft is not None and quick.peft.adapted_name == "invertedpendulum-adapted"
    assert full.peft is not None and full.peft.adapted_name == "halfcheetah-policy-adapted"  # the default


def test_defaults_are_on_the_model():
    profile = validate_profile({"name": "x"}, "x", REPO)
    assert not profile.gpu and profile.train is profile.latent is profile.peft is None
    assert (profile.tune.workers, profile.tune.overrides) == (0, [])
    assert profile.resources == Resources()
    assert Resources().model_dump() == {
        "gpu_count": 1, "cpu_request": "2", "cpu_limit": "4", "memory_request": "8G", "memory_limit": "16G",
        "node_selector": {"cloud.google.com/gke-nodepool": "gpu-pool"},
        "toleration": {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    }  # fmt: skip


def test_numbers_are_kubernetes_quantities():
    res = Resources.model_validate({"cpu_request": 2, "cpu_limit": 0.5, "memory_request": 8, "gpu_count": "2"})
    assert (res.cpu_request, res.cpu_limit, res.memory_request, res.gpu_count) == ("2", "0.5", "8", 2)
    assert Resources(cpu_request="500m", memory_limit="64Gi").cpu_request == "500m"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "x", "gpus": True}, "gpus: unknown key; allowed keys here: name, gpu, resources, stages"),
        ({"name": "x", "resources": {"cpus": 4}}, "resources.cpus: unknown key; allowed keys here: gpu_count,"),
        ({"name": "x", "stages": {"train": {**TRAIN, "model": "m"}}}, "stages.train.model: unknown key; allowed"),
        ({"name": "x", "stages": {"evaluate": {}}}, "stages.evaluate: unknown key; allowed keys here: train, tune,"),
        ({"name": "x", "stages": {"tune": {"workers": "two"}}}, "stages.tune.workers = 'two': Input should be a valid"),
        ({"name": "x", "gpu": "sometimes"}, "gpu = 'sometimes': Input should be a valid boolean"),
        ({"name": "x", "stages": {"tune": {"workers": -1}}}, "stages.tune.workers = -1: Input should be greater than"),
        ({"name": "x", "resources": {"gpu_count": 0}}, "resources.gpu_count = 0: Input should be greater than"),
        ({"name": "x", "resources": {"cpu_request": "four"}}, "cpu_request = 'four': not a Kubernetes CPU quantity"),
        ({"name": "x", "resources": {"memory_limit": "16 GB"}}, "memory_limit = '16 GB': not a Kubernetes memory"),
        ({"name": "x", "stages": {"train": {"config": "configs/cartpole-ppo.yaml"}}},
         "stages.train.model_name: required key missing; add it"),
        ({"gpu": True}, "name: required key missing; add it"),
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
        ({"name": "x", "resources": {"gpu": 1}}, "resources.gpu: unknown key"),
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
