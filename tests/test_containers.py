"""The step image for real: built from this checkout, run, pushed to a registry, pinned by digest,
a registry that is not there, and a step container's exit code. (Pushing to a registry, compiling with
the pushed digest and running the compiled DAG from it are one test: ``test_cluster_execution.py``.)

These need a Docker daemon. Without one they skip, saying so; in CI (``.ci/run`` installs and
starts dockerd, and builds the image) they fail instead. The image is the ``step_image`` fixture
(conftest.py).
"""

from __future__ import annotations

import json

import pytest

from frugalrl.cli import main
from frugalrl.ops.images import daemon_available

from .conftest import IN_CI, REPO, _free_port

if not IN_CI and not daemon_available():  # one line for the whole module (in CI: fail instead)
    pytest.skip("no Docker daemon answers (start dockerd; .ci/run does): the container tests need one",
                allow_module_level=True)  # fmt: skip


def _docker_run(image: str, *command: str) -> str:
    import docker

    out = docker.from_env().containers.run(image, list(command), remove=True, stdout=True, stderr=True)
    return out.decode()


@pytest.mark.slow
def test_the_image_runs_the_doctor_as_its_non_root_user(step_image):
    report = _docker_run(step_image.tag, "check")  # what `docker run --rm IMAGE check` prints
    assert "torch" in report and "mlflow" in report and "kfp" in report
    assert _docker_run(step_image.tag, "sh", "-c", "id -u; id -un").split() == ["1000", "frugal"]
    env = _docker_run(step_image.tag, "sh", "-c", "echo $FRUGALRL_GIT_COMMIT")
    assert env.strip() == step_image.git_commit  # every run in the image names the commit it was built from
    assert step_image.tag == f"frugalrl:0.1.0-{step_image.git_commit[:12]}" + ("-dirty" if step_image.git_dirty else "")


def test_pushing_to_no_registry_is_one_line(records, capsys):
    port = _free_port()  # nothing listens there
    with pytest.raises(SystemExit) as exit_info:
        main(["image", "push", "--registry", f"127.0.0.1:{port}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: push to 127.0.0.1:{port} failed:") and "\n" not in err
    assert json.loads((records / "image-cpu.json").read_text())["digest"] is None  # the record is unchanged


def test_runner_docker_without_an_mlflow_server_is_one_line(step_image, records, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["pipeline", "run", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "--runner", "docker",
              "--root", str(tmp_path / "root")])  # fmt: skip
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --runner docker needs an MLflow server the containers can reach") and "\n" not in err
    assert not (tmp_path / "root").exists() or not any((tmp_path / "root").iterdir())


def test_a_base_from_an_unreachable_registry_is_one_line_naming_the_local_base(records, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["image", "build", "--base", "registry.invalid/python:3.11-slim"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the build failed:") and "\n" not in err, err
    assert "--base debootstrap" in err, err


@pytest.mark.parametrize("code", [0, 3])
def test_a_step_container_reports_its_real_exit_code(step_image, code):
    """A container that exits at once (kfp.local's own runner could lose its code and say 0)."""
    import docker
    from frugalrl.pipelines.containers import run_container_and_wait

    client = docker.from_env()
    try:
        assert run_container_and_wait(client, step_image.tag, ["sh", "-c", f"exit {code}"], {}) == code
    finally:
        client.close()
