"""What ``pip install frugalrl`` puts into an environment: one top-level name, and a core that trains
without the Kubeflow platform (kfp, the Kubernetes and Trainer models, the Docker SDK, the MLflow server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO

# What the pipelines and peft extras install (import names); none of them may be in a core install.
PLATFORM = ("kfp", "kubernetes", "kubeflow", "kubeflow_trainer_api", "docker", "flask", "peft", "transformers")
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")  # the Makefile's default, as make setup installs it


def _declared_packages() -> list[str]:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's; this Python cannot read pyproject.toml")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def test_the_package_list_names_every_folder_of_the_library_and_the_kfp_layer():
    """pyproject.toml lists packages by hand (the KFP folders are mapped under frugalrl): a new subpackage
    that is not listed would be missing from every wheel and image."""
    on_disk = {".".join(p.parent.relative_to(REPO / "src").parts) for p in (REPO / "src").rglob("__init__.py")}
    on_disk |= {f"frugalrl.{folder}" for folder in ("pipelines", "components")}
    assert sorted(_declared_packages()) == sorted(on_disk)
    for folder in ("pipelines", "components"):  # flat folders: a subpackage there would need its own mapping
        assert [p.parent for p in (REPO / folder).rglob("__init__.py")] == [REPO / folder]


def _pip(python: Path, *args: str) -> None:
    constraints = REPO / "constraints" / f"py{sys.version_info.major}{sys.version_info.minor}.txt"
    pins = ["-c", str(constraints)] if constraints.is_file() else []
    quiet = ["--quiet", "--no-compile", "--disable-pip-version-check"]  # no .pyc of torch's thousands of files
    done = subprocess.run([str(python), "-m", "pip", "install", *quiet, *args, *pins], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


CORE_RUN = """
import importlib.util, json, sys
import frugalrl
run = frugalrl.train(sys.argv[1], "runs/cartpole", overrides=["ppo.total_timesteps=2048", "tracking.enabled=true"])
policy = frugalrl.load_policy(run.run_dir)
print(json.dumps({"eval_mean": run.summary["eval_mean"], "mlflow_run_id": run.summary["mlflow_run_id"],
                  "policy": type(policy).__name__,
                  "installed": [m for m in sys.argv[2:] if importlib.util.find_spec(m) is not None]}))
"""


@pytest.mark.slow  # builds a wheel and a fresh environment (about a minute with pip's cache warm)
def test_a_core_install_trains_cartpole_with_no_kubeflow_docker_or_mlflow_server(tmp_path):
    wheels = tmp_path / "wheels"
    # the build backend of this environment (make setup's), not a fresh download of it for every run
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
    build = subprocess.run([*pip_wheel, "--no-build-isolation", "-w", str(wheels), str(REPO)], capture_output=True,
                           text=True)  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("frugalrl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["frugalrl"]
    assert {"frugalrl/pipelines/production.py", "frugalrl/components/train.py"} <= set(names)

    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    _pip(python, TORCH_SPEC)
    _pip(python, str(wheel))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI")}
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run([str(python), "-c", CORE_RUN, str(REPO / "configs" / "cartpole-ppo.yaml"), *PLATFORM],
                         cwd=work, env=env, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["installed"] == [] and result["policy"] == "ExportedPolicy"
    assert result["mlflow_run_id"] and "stopped answering" not in run.stderr  # tracked, the model logged too
    assert (work / "runs" / "cartpole" / "policy.pt").is_file()

    # a command of the pipelines extra says which extra to install, in one line
    compile_ = subprocess.run([str(tmp_path / "venv" / "bin" / "frugalrl"), "pipeline", "compile", "--config",
                               str(REPO / "configs" / "cartpole-ppo.yaml")], cwd=work, env=env,
                              capture_output=True, text=True)  # fmt: skip
    assert compile_.returncode == 2
    assert compile_.stderr.strip() == (
        "error: this needs frugalrl's pipelines extra (kfp is not installed): pip install 'frugalrl[pipelines]'"
    )
