"""The step image's logic that needs no Docker daemon: the build context, pinning an image into a
pipeline's steps (a cluster's image: a registry and a digest), what compile says of it, and the one line
when no daemon answers."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.ops.image_context import context_files, write_context
from frugalrl.ops.images import ImageError, ImageRecord, digest_of, is_pinned, save_record

from .conftest import REPO

DIGEST = "sha256:" + "d" * 64


def test_no_daemon_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SystemExit) as exit_info:
        main(["image", "build"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no Docker daemon answers at unix:///nonexistent/docker.sock") and "\n" not in err


def test_the_context_holds_what_the_dockerfiles_copy_and_the_extras(tmp_path):
    names = context_files(REPO)
    for needed in ("pyproject.toml", "README.md", "src/frugalrl/ops/images.py", "images/Dockerfile.cpu",
                   "images/entrypoint.sh", "components/train.py", "profiles/quick.yaml"):  # fmt: skip
        assert needed in names
    assert not [n for n in names if n.startswith((".venv", "tests/", "benchmarks/")) or "__pycache__" in n]
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    cert = tmp_path / "ca.pem"
    cert.write_text("CERT")
    write_context(REPO, tmp_path / "c.tar", [wheel], cert, "numpy==2.0.0\n")
    with tarfile.open(tmp_path / "c.tar") as tar:
        inside = set(tar.getnames())
        assert tar.extractfile("images/extras/constraints.txt").read() == b"numpy==2.0.0\n"
    assert {f"images/extras/wheels/{wheel.name}", "images/extras/pip-ca.pem"} <= inside
    assert set(names) <= inside


def _record(**extra) -> ImageRecord:
    fields = dict(flavor="cpu", tag="frugalrl:0.1.0-abc", image_id="sha256:" + "1" * 64, base="b",
                  git_commit="abc", git_dirty=False, size_bytes=1, build_s=1.0, built_at="now")  # fmt: skip
    return ImageRecord(**{**fields, **extra})


def test_what_a_run_records_as_its_image_digest():
    record = _record()
    assert digest_of(f"127.0.0.1:5000/frugalrl@{DIGEST}") == DIGEST
    assert digest_of(record.tag, record) == record.image_id  # a local build, run by tag
    assert digest_of("frugalrl:latest") == "unpinned"
    pushed = _record(repository="127.0.0.1:5000/frugalrl", digest=DIGEST)
    assert pushed.reference == pushed.pinned == f"127.0.0.1:5000/frugalrl@{DIGEST}"


def _compile(out, *args: str) -> None:
    main(["pipeline", "compile", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "-o", str(out), *args])


def test_compile_refuses_an_image_a_cluster_cannot_pull_by_digest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path / "records"))
    out = tmp_path / "p.yaml"
    with pytest.raises(SystemExit) as exited:  # nothing built or pushed here
        _compile(out)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "no cpu image to name" in err and "frugalrl image push --registry HOST:PORT" in err
    assert not out.exists()

    save_record(REPO, _record())  # FRUGALRL_IMAGE_RECORDS: written under tmp_path, not the checkout
    assert json.loads((tmp_path / "records" / "image-cpu.json").read_text())["tag"] == "frugalrl:0.1.0-abc"
    with pytest.raises(SystemExit) as exited:  # built, not pushed: a tag no registry holds
        _compile(out)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert (
        "cpu image frugalrl:0.1.0-abc (from the last cpu build (frugalrl:0.1.0-abc), not pushed) is not pinned" in err
    )
    assert "--allow-unpinned" in err and not out.exists()


def test_compile_pins_the_pushed_build_by_digest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path / "records"))
    pushed = _record(repository="127.0.0.1:5000/frugalrl", digest=DIGEST)
    save_record(REPO, pushed)
    out = tmp_path / "p.yaml"
    _compile(out)
    said = capsys.readouterr().out
    assert f"image: {pushed.pinned} (from the last cpu build (frugalrl:0.1.0-abc))" in said
    assert "not pinned" not in said
    ir = next(yaml.safe_load_all(out.read_text()))
    executors = ir["deploymentSpec"]["executors"].values()
    assert {e["container"]["image"] for e in executors} == {pushed.pinned}
    assert all({"name": "FRUGALRL_IMAGE_DIGEST", "value": DIGEST} in e["container"]["env"] for e in executors)
    assert "NOT PINNED" not in ir["pipelineInfo"].get("description", "")


def test_an_unpinned_image_passes_only_when_allowed_and_the_pipeline_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path / "records"))
    save_record(REPO, _record())
    out = tmp_path / "p.yaml"
    _compile(out, "--allow-unpinned")
    said = capsys.readouterr().out
    assert "image: frugalrl:0.1.0-abc (from the last cpu build (frugalrl:0.1.0-abc), not pushed)" in said
    assert "not pinned (--allow-unpinned; for a dev cluster only): frugalrl:0.1.0-abc" in said
    ir = next(yaml.safe_load_all(out.read_text()))
    assert ir["pipelineInfo"]["description"].endswith("[NOT PINNED, dev clusters only: frugalrl:0.1.0-abc]")
    executors = ir["deploymentSpec"]["executors"].values()
    assert {e["container"]["image"] for e in executors} == {"frugalrl:0.1.0-abc"}
    assert all(
        {"name": "FRUGALRL_IMAGE_DIGEST", "value": "sha256:" + "1" * 64} in e["container"]["env"] for e in executors
    )  # fmt: skip  (a local build: its image ID)
    from frugalrl.pipelines.training import pipeline_for

    assert "NOT PINNED" not in pipeline_for("plain").pipeline_spec.pipeline_info.description  # restored after


@pytest.mark.parametrize(
    ("reference", "pinned"),
    [
        (f"registry.example.com/frugalrl@{DIGEST}", True),
        (f"127.0.0.1:5000/frugalrl@{DIGEST}", True),
        (f"localhost/frugalrl@{DIGEST}", True),
        (f"registry.example.com/team/frugalrl:0.1.0@{DIGEST}", True),  # a tag beside the digest: the digest decides
        (f"frugalrl@{DIGEST}", False),  # no registry: whatever the node defaults to
        (f"team/frugalrl@{DIGEST}", False),  # a namespace, not a host
        ("registry.example.com/frugalrl:0.1.0-cpu", False),  # a tag can be pushed over
        ("frugalrl:0.1.0-cpu", False),
        ("registry.example.com/frugalrl@sha256:abc", False),  # not a whole digest
    ],
)
def test_pinned_means_a_registry_and_a_digest(reference, pinned):
    assert is_pinned(reference) is pinned


def test_pinning_names_the_image_in_every_step_and_leaves_the_pipeline_as_it_was():
    from frugalrl.pipelines.containers import images_of, pinned_image
    from frugalrl.pipelines.production import build_pipeline, load_profile

    pipeline = build_pipeline(load_profile("quick"))
    before = images_of(pipeline)
    reference = f"127.0.0.1:5000/frugalrl@{DIGEST}"
    with pinned_image(pipeline, reference, DIGEST):
        assert images_of(pipeline) == {reference}
    assert images_of(pipeline) == before == {"frugalrl:0.1.0-cpu"}


def test_pinning_names_the_image_of_the_pytorchjob_workers_too(tmp_path):
    """GPU steps and the distributed job's workers run the CUDA image; every other step the CPU one."""
    from frugalrl.pipelines.local import compile_pipeline

    reference, cuda = f"127.0.0.1:5000/frugalrl@{DIGEST}", f"127.0.0.1:5000/frugalrl-cuda@sha256:{'e' * 64}"
    lines = compile_pipeline(tmp_path / "full.yaml", profile="full", image=reference, cuda_image=cuda)
    assert lines[0] == f"image: {reference} (from --image)" and len(lines) == 2
    assert lines[1].startswith(f"GPU steps' image: {cuda} (from --")  # the option that named it
    ir = next(yaml.safe_load_all((tmp_path / "full.yaml").read_text()))
    assert ir["root"]["inputDefinitions"]["parameters"]["training_image"]["defaultValue"] == cuda
    executors = ir["deploymentSpec"]["executors"]
    on_gpu = {name for name, e in executors.items() if "accelerator" in e["container"]["resources"]}
    assert on_gpu == {"exec-pretrain-2", "exec-train-2"}  # the Breakout encoder and curriculum training
    assert {name: e["container"]["image"] for name, e in executors.items()} == {
        name: cuda if name in on_gpu else reference for name in executors
    }
    for name in on_gpu:  # the run records the image it ran in
        assert {"name": "FRUGALRL_IMAGE_DIGEST", "value": "sha256:" + "e" * 64} in executors[name]["container"]["env"]


def test_a_gpu_profile_without_a_cuda_image_is_refused(tmp_path, monkeypatch):
    from frugalrl.pipelines.local import compile_pipeline

    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path / "records"))  # no cuda build recorded
    with pytest.raises(ImageError, match="no cuda image to name: .* or pass --cuda-image HOST/frugalrl@sha256:"):
        compile_pipeline(tmp_path / "full.yaml", profile="full", image=f"127.0.0.1:5000/frugalrl@{DIGEST}")
    assert not (tmp_path / "full.yaml").exists()
    with pytest.raises(ImageError, match="cuda image frugalrl:0.1.0-cuda \\(from --(cuda-)?image\\) is not pinned"):
        compile_pipeline(tmp_path / "full.yaml", profile="full", image=f"127.0.0.1:5000/frugalrl@{DIGEST}",
                         cuda_image="frugalrl:0.1.0-cuda")  # fmt: skip
    assert not (tmp_path / "full.yaml").exists()


def test_a_build_that_reaches_no_registry_names_the_local_base():
    from frugalrl.ops.images import build_failure

    dns = ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.2:53: '
           "no such host")  # fmt: skip
    line = build_failure(dns, "build.log")
    assert "no such host" in line and "--base debootstrap" in line and "make image BASE=debootstrap" in line
    step = build_failure("The command '/bin/sh -ec pip install ...' returned a non-zero code: 1", "build.log")
    assert "debootstrap" not in step and step.endswith("(full log: build.log)")


def test_a_step_container_that_fails_fast_is_a_failure_not_a_success(monkeypatch):
    """kfp.local (2.17) reads a container's exit code after ``auto_remove`` may have removed it, and then
    says 0; the runner frugalrl installs keeps the container until its code is read."""
    from frugalrl.pipelines.containers import docker_runner, run_container_and_wait
    from kfp.local import docker_task_handler

    class Container:
        removed = False

        def logs(self, stream):
            return iter([b"step output\n"])

        def wait(self):
            return {"StatusCode": 3}

        def remove(self, force):
            Container.removed = True

    class Client:
        class containers:  # noqa: N801 - docker's attribute name
            @staticmethod
            def run(**kwargs):
                assert kwargs["auto_remove"] is False and kwargs["detach"] is True
                return Container()

    assert run_container_and_wait(Client(), "img", ["false"], {}, auto_remove=True) == 3
    assert Container.removed
    monkeypatch.setattr(docker_task_handler, "run_docker_container", docker_task_handler.run_docker_container)
    monkeypatch.setattr("frugalrl.pipelines.containers._shareable", lambda root: None)
    docker_runner(Path("."))
    assert docker_task_handler.run_docker_container is run_container_and_wait  # what each step now runs


def test_each_with_item_is_a_package_a_wheel_modules_or_a_requirement(tmp_path):
    from frugalrl.ops.image_with import classify

    package, modules, module, wheel = tmp_path / "pkg", tmp_path / "mods", tmp_path / "myenvs.py", tmp_path / "a.whl"
    package.mkdir(), modules.mkdir()
    (package / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    module.write_text(""), wheel.write_text("")
    assert classify(str(package)) == ("package", package)
    assert classify(str(modules)) == ("modules", modules)
    assert classify(str(module)) == ("modules", module)
    assert classify(str(wheel)) == ("wheel", wheel)
    assert classify("gymnasium-robotics==1.4") == ("requirement", None)
    with pytest.raises(ImageError, match="not a pip requirement"):
        classify(str(tmp_path / "typo folder"))
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ImageError, match=r"a \.py module or a \.whl"):
        classify(str(tmp_path / "notes.txt"))


def test_the_with_layer_installs_packages_puts_modules_on_the_path_and_records_what_it_added():
    from frugalrl.ops.image_with import MODULES, dockerfile

    text = dockerfile("sha256:abc", [("modules", MODULES), ("requirement", "pkg>=1"), ("package", "/opt/x/item1")],
                      '["myenvs.py", "pkg>=1", "./pkg"]', cert=False)  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "FROM sha256:abc" and lines[-1] == "USER 1000"  # back to the image's own user
    assert 'pip install --no-cache-dir "pkg>=1" "/opt/x/item1" && pip check' in text
    assert f"PYTHONPATH={MODULES}" in text and 'FRUGALRL_IMAGE_WITH="[\\"myenvs.py\\"' in text
    assert 'LABEL org.frugalrl.with="[\\"myenvs.py\\", \\"pkg>=1\\", \\"./pkg\\"]"' in text
    assert "pip install" not in dockerfile("sha256:abc", [("modules", MODULES)], "[]", cert=False)


def test_with_needs_a_step_image_built_first(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path))
    (tmp_path / "m.py").write_text("")
    with pytest.raises(SystemExit) as exited:
        main(["image", "build", "--with", str(tmp_path / "m.py")])
    assert exited.value.code == 2
    assert "no cpu step image was built from this checkout; run `frugalrl image build` first" in capsys.readouterr().err
