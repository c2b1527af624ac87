"""The step image for real: built from this checkout, run, pushed to a registry, pinned by digest,
a registry that is not there, and a step container's exit code. (The production DAG in containers
against the same DAG as subprocesses is in ``test_mlflow_server.py``: it shares that module's run.)

These need a Docker daemon. Without one they skip, saying so; in CI (``.ci/run`` installs and
starts dockerd, and builds the image) they fail instead. The image is the ``step_image`` fixture
(conftest.py).
"""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.ops.images import ImageRecord, daemon_available

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


@pytest.mark.slow
def test_push_then_compile_names_the_pushed_digest_in_every_step(records, registry, tmp_path, capsys):
    main(["image", "push", "--registry", registry])
    record = ImageRecord(**json.loads((records / "image-cpu.json").read_text()))
    assert record.repository == f"{registry}/frugalrl" and record.digest.startswith("sha256:")
    pinned = f"{registry}/frugalrl@{record.digest}"
    assert capsys.readouterr().out.strip().endswith(f"pushed: {pinned}")
    # the registry serves that digest
    accept = {"Accept": "application/vnd.docker.distribution.manifest.v2+json"}
    url = f"http://{registry}/v2/frugalrl/manifests/{record.digest}"
    manifest = urllib.request.Request(url, method="HEAD", headers=accept)
    assert urllib.request.urlopen(manifest, timeout=10).status == 200

    main(["pipeline", "compile", "--profile", "quick", "-o", str(tmp_path / "quick.yaml")])
    assert f"image: {pinned} (from the last cpu build" in capsys.readouterr().out
    ir = next(yaml.safe_load_all((tmp_path / "quick.yaml").read_text()))
    executors = ir["deploymentSpec"]["executors"]
    assert len(executors) >= 10
    for executor in executors.values():
        container = executor["container"]
        assert container["image"] == pinned
        assert {"name": "FRUGALRL_IMAGE_DIGEST", "value": record.digest} in container["env"]

    other = f"{registry}/frugalrl@sha256:{'c' * 64}"
    main(["pipeline", "compile", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "--image", other,
          "-o", str(tmp_path / "plain.yaml")])  # fmt: skip
    ir = next(yaml.safe_load_all((tmp_path / "plain.yaml").read_text()))
    assert {e["container"]["image"] for e in ir["deploymentSpec"]["executors"].values()} == {other}


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
    from pipelines.containers import run_container_and_wait

    client = docker.from_env()
    try:
        assert run_container_and_wait(client, step_image.tag, ["sh", "-c", f"exit {code}"], {}) == code
    finally:
        client.close()
