"""A user's own gymnasium env: ``env.id: module:EnvId`` and ``env.imports``, through every command that makes it.

The env module is the one docs/own-env.md shows (its ``python`` block under "The example env module"),
written under a unique name per test (``sys.modules`` keeps a module once imported), in a folder on
``sys.path`` and ``PYTHONPATH`` but not the working directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

from frugalrl.cli import main
from frugalrl.config import load_config
from frugalrl.ops.images import daemon_available
from frugalrl.training import train

from .conftest import IN_CI, REPO, needs_postgres

DOC = REPO / "docs" / "own-env.md"
TINY = ["ppo.total_timesteps=512", "ppo.num_steps=64", "ppo.batch_size=64", "ppo.update_epochs=1", "eval.episodes=2"]
NO_TRACKING = ["tracking.enabled=false"]


def _block(heading: str, language: str) -> str:
    """The first fenced ``language`` block under ``## heading`` in docs/own-env.md."""
    section = DOC.read_text().split(f"\n## {heading}\n", 1)[1]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


@pytest.fixture(autouse=True)
def _registry_restored():
    """The ids a test registers leave with it."""
    before = set(gym.registry)
    yield
    for env_id in set(gym.registry) - before:
        del gym.registry[env_id]


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A folder on sys.path and PYTHONPATH (not the working directory), and a writer of modules into it."""
    folder = tmp_path / "userpkgs"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]))

    def write(code: str) -> str:
        name = f"myenvs_{uuid.uuid4().hex[:10]}"
        (folder / f"{name}.py").write_text(code.replace("myenvs", name))
        return name

    return write


def _config(tmp_path: Path, module: str, **env: object) -> Path:
    """The page's config with the module renamed (and ``env`` keys replaced), as reach.yaml."""
    data = yaml.safe_load(_block("The config", "yaml").replace("myenvs", module))
    data["env"].update(env)
    path = tmp_path / "reach.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(argv: list[str], capsys) -> str:
    """The one error line of a command that exits 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_info.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_the_page_shows_the_one_line_errors_the_code_gives(tmp_path, modules, capsys):
    """Each error line docs/own-env.md quotes is what frugalrl prints (module renamed)."""
    here = DOC.read_text().split("\n## In containers")[0]  # the step image's line is checked in containers
    quoted = re.findall(r"^error: reach\.yaml: .*$", here, re.M)
    assert len(quoted) == 3
    good = modules(_block("The example env module", "python"))
    broken = modules(_block("The example env module", "python").replace("import gymnasium as gym\n", ""))
    missing = f"myenvs_missing_{uuid.uuid4().hex[:8]}"
    cases = [(missing, f"{missing}:Reach1D-v0"), (broken, f"{broken}:Reach1D-v0"), (good, f"{good}:Reach2D-v0")]
    for line, (module, env_id) in zip(quoted, cases, strict=True):
        config = _config(tmp_path, module, id=env_id)
        got = _refused(["config", "validate", str(config)], capsys)
        assert got.replace(str(config), "reach.yaml") == line.replace("myenvs", module), got


def test_validate_takes_module_id_and_env_imports(tmp_path, modules, capsys):
    name = modules(_block("The example env module", "python"))
    main(["config", "validate", str(_config(tmp_path, name))])
    assert capsys.readouterr().out.strip()
    config = _config(tmp_path, "unused", id="Reach1D-v0", imports=[name])
    main(["config", "validate", str(config)])
    loaded = load_config(config)
    assert loaded.env.imports == [name] and loaded.env.id == "Reach1D-v0"


def test_an_id_without_its_module_is_refused_with_where_to_look(tmp_path, capsys):
    line = _refused(["config", "validate", str(_config(tmp_path, "x", id="Reach1D-v0"))], capsys)
    assert "env.id = 'Reach1D-v0': not a registered environment" in line and "MODULE:EnvId" in line


def test_a_module_that_raises_on_import_is_one_line_naming_the_error(tmp_path, modules, capsys):
    name = modules('raise RuntimeError("no target range configured")\n')
    line = _refused(["config", "validate", str(_config(tmp_path, name))], capsys)
    assert f"importing module '{name}' failed: RuntimeError: no target range configured" in line
    line = _refused(["config", "validate", str(_config(tmp_path, "x", id="Reach1D-v0", imports=[name]))], capsys)
    assert line.startswith(f"error: {tmp_path / 'reach.yaml'}: env.imports = ['{name}']: importing module")


def test_a_missing_module_is_one_line_saying_pythonpath_or_pip(tmp_path, capsys):
    name = f"myenvs_missing_{uuid.uuid4().hex[:8]}"
    line = _refused(["config", "validate", str(_config(tmp_path, name))], capsys)
    assert f"No module named '{name}'" in line and "PYTHONPATH" in line and "pip install" in line
    line = _refused(["train", str(_config(tmp_path, "x", id="Reach1D-v0", imports=[name])), "-o", "run"], capsys)
    assert "env.imports" in line and "PYTHONPATH" in line
    assert not Path("run").exists()


def test_a_file_path_is_not_a_module_name(tmp_path, capsys):
    line = _refused(["config", "validate", str(_config(tmp_path, "./myenvs.py"))], capsys)
    assert "'./myenvs.py' is not a module name" in line


@pytest.mark.slow
def test_train_then_evaluate_in_a_fresh_process_keeps_the_id(tmp_path, modules, capsys):
    """``frugalrl train`` here; ``frugalrl evaluate`` in a new process (the console script, another working
    directory), which imports the module only because the saved config names it."""
    name = modules(_block("The example env module", "python"))
    env_id = f"{name}:Reach1D-v0"
    sets = [a for item in [*TINY, *NO_TRACKING] for a in ("--set", item)]
    main(["train", str(_config(tmp_path, name)), "--out", str(tmp_path / "run"), *sets])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env_id"] == env_id
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["env"]["id"] == env_id
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = Path(sys.executable).parent / "frugalrl"
    proc = subprocess.run(
        [str(script), "evaluate", str(tmp_path / "run"), "--episodes", "2", "--json"],
        cwd=elsewhere, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["env_id"] == env_id and len(result["returns"]) == 2
    assert all(-40.0 <= r <= 0.0 for r in result["returns"])  # 20 steps, distance at most 2 each
    without = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run([str(script), "evaluate", str(tmp_path / "run"), "--episodes", "2"],
                          cwd=elsewhere, capture_output=True, text=True, timeout=120, env=without)  # fmt: skip
    assert proc.returncode == 2 and f"No module named '{name}'" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_python_route_with_env_imports(tmp_path, modules):
    """``load_config`` + ``train``: a plain id registered by a module ``env.imports`` names; the id as written."""
    name = modules(_block("The example env module", "python"))
    config = load_config(_config(tmp_path, "x", id="Reach1D-v0", imports=[name]), [*TINY, *NO_TRACKING])
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["env_id"] == "Reach1D-v0"
    assert load_config(tmp_path / "run" / "config.yaml").env.imports == [name]


def test_tune_and_evaluate_a_module_id(tmp_path, modules, capsys):
    """``frugalrl tune`` on a module id (two trials), then ``frugalrl evaluate`` of the best trial's run."""
    name = modules(_block("The example env module", "python"))
    config = _config(tmp_path, name)
    tuning = ["tuning.trials=2", "tuning.space={ppo.learning_rate: {type: float, low: 1.0e-4, high: 1.0e-3}}",
              "tuning.report_every_updates=1"]  # fmt: skip
    sets = [a for item in [*TINY, *NO_TRACKING, *tuning] for a in ("--set", item)]
    main(["tune", "-c", str(config), "-o", str(tmp_path / "tune"), *sets])
    best = json.loads((tmp_path / "tune" / "best.json").read_text())
    run = tmp_path / "tune" / best["best_run_dir"].split("/")[-1]
    assert json.loads((run / "summary.json").read_text())["env_id"] == f"{name}:Reach1D-v0"
    capsys.readouterr()
    main(["evaluate", str(run), "--episodes", "2", "--json"])
    assert json.loads(capsys.readouterr().out)["env_id"] == f"{name}:Reach1D-v0"


@pytest.mark.slow
@needs_postgres
def test_the_pipeline_runs_the_env_in_containers_of_an_image_built_with_it(tmp_path, modules, request, capfd):
    """docs/own-env.md "In containers": the step image as built refuses the env as its first step starts (the
    page's line); ``image build --with`` the module, and the pipeline trains, evaluates and registers it in
    containers, each run tagged with what the image added."""
    if not IN_CI and not daemon_available():
        pytest.skip("no Docker daemon answers (start dockerd; .ci/run does): the steps run in containers")
    request.getfixturevalue("records")  # a private copy of the image record: the --with build goes there
    request.getfixturevalue("mlflow_server")  # the containers reach it on the host network
    name = modules(_block("The example env module", "python"))
    config = _config(tmp_path, name)
    sets = [a for item in TINY for a in ("--set", item)]
    run = ["pipeline", "run", "--config", str(config), "--runner", "docker", *sets]
    with pytest.raises(SystemExit) as exit_info:
        main([*run, "--root", str(tmp_path / "stock")])
    assert exit_info.value.code == 1
    logged = capfd.readouterr()
    refused = [line for line in (logged.out + logged.err).splitlines() if "cannot import module" in line]
    page = re.search(r"^error: reach\.yaml: (.*)$", DOC.read_text().split("\n## In containers")[1], re.M).group(1)
    pattern = re.escape(page.replace("myenvs", name)).replace(re.escape("..."), ".*")
    assert refused and re.search(pattern, refused[0]) and "Traceback" not in logged.out + logged.err, refused

    module_file = tmp_path / "userpkgs" / f"{name}.py"  # where the modules fixture wrote it
    main(["image", "build", "--with", str(module_file)])
    main([*run, "--root", str(tmp_path / "with")])
    from mlflow import MlflowClient

    client = MlflowClient()
    version = client.get_model_version_by_alias("reach1d-policy", "challenger")
    assert version.tags["frugalrl.env_id"] == f"{name}:Reach1D-v0"
    tags = client.get_run(version.run_id).data.tags
    assert json.loads(tags["frugalrl.image_with"]) == [str(module_file)]
    assert "-with-" in tags["frugalrl.image"]  # the run names the image it ran in

    uri = "models:/reach1d-policy@challenger"  # played by a plain client: no frugalrl, the module on PYTHONPATH
    block = "import sys, runpy; sys.modules['frugalrl'] = None; "
    block += f"sys.argv = ['play', {uri!r}, '--episodes', '3']; "
    block += f"runpy.run_path({str(REPO / 'scripts' / 'play_registered.py')!r}, run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(proc.stdout.strip().splitlines()[-1])
    capfd.readouterr()
    main(["evaluate", uri, "--episodes", "3", "--json"])
    ours = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert played["env_id"] == ours["env_id"] == f"{name}:Reach1D-v0"
    assert played["returns"] == pytest.approx(ours["returns"], rel=1e-5)  # same seeds, same deterministic actions


def test_a_race_runs_on_the_users_env(tmp_path, modules, capsys):
    """The page's race command (one seed of one CPU-second here) on the page's env: rows, table, decision."""
    name = modules(_block("The example env module", "python"))
    command = _block("Which technique pays on it?", "bash").split()
    assert command[:2] == ["frugalrl", "race"]
    argv = [part.replace("reach.yaml", str(_config(tmp_path, name))) for part in command[1:]]
    argv[argv.index("--seeds") + 1], argv[argv.index("--cpu-budget-s") + 1] = "1", "1"
    argv[argv.index("--out") + 1] = str(tmp_path / "race")
    main(argv)
    out = capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "race" / "rows.jsonl").read_text().splitlines()]
    assert sorted((r["contender"], r["seed"]) for r in rows) == [("plain", 1), ("random-skip", 1)]
    assert all(r["stopped_by_cpu_budget"] and -20 <= r["score"] <= 0 for r in rows)
    assert "Decision: too few seeds to decide" in out
    assert f"{name}:Reach1D-v0" in (tmp_path / "race" / "runs" / "plain-seed1" / "config.yaml").read_text()
