"""The image every step runs in: pinned into a pipeline's spec, and kfp.local's DockerRunner for it.

``pinned_image`` writes one image reference into every executor of a pipeline (and the digest into
each step's environment, where ``frugalrl.tracking`` records it as the run's ``frugalrl.image_digest``
tag), for as long as a compile or a local run needs it; the pipeline object is as before afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import struct_pb2
from kfp import local

from frugalrl.errors import FrugalError
from frugalrl.ops.images import ImageRecord, check_reference, digest_of, load_record, require_local_image
from frugalrl.tracking.provenance import IMAGE_DIGEST_ENV, IMAGE_REF_ENV

REPO = Path(__file__).resolve().parent.parent
# What a step reads from its environment and a container must therefore be given.
PASSED_ENV_PREFIXES = ("MLFLOW_", "OPTUNA_", "FRUGALRL_")
TRAINING_IMAGE = "training_image"  # the production DAG's parameter: the image of its PyTorchJob pods


def resolve_image(
    image: str | None, flavor: str = "cpu", repo: Path = REPO, option: str = "--image"
) -> tuple[str, str, str] | None:
    """(reference, digest, where it came from) for ``option REF``, else the checkout's last build, else None."""
    if image is not None:
        reference = check_reference(image, option)
        return reference, digest_of(reference), option
    record: ImageRecord | None = load_record(repo, flavor)
    if record is None:
        return None
    source = f"the last {flavor} build ({record.tag})" + ("" if record.pinned else ", not pushed")
    return record.reference, digest_of(record.reference, record), source


@contextlib.contextmanager
def pinned_image(pipeline: Any, reference: str, digest: str, cuda: tuple[str, str] | None = None) -> Iterator[None]:
    """While open, every executor of ``pipeline`` runs ``reference`` with the digest in its environment; with
    ``cuda`` (reference, digest), the executors that ask for a GPU (and the TrainJob's workers) run that one."""
    spec = pipeline.pipeline_spec
    saved = struct_pb2.Struct()
    saved.CopyFrom(spec.deployment_spec)
    # the production DAG's PyTorchJob workers take their image as a pipeline parameter: its default too
    parameters = spec.root.input_definitions.parameters
    training = parameters[TRAINING_IMAGE].default_value if TRAINING_IMAGE in parameters else None
    saved_training = training.string_value if training is not None else None
    try:
        if training is not None:
            training.string_value = (cuda or (reference,))[0]
        executors = spec.deployment_spec["executors"]
        for name in list(executors.keys()):
            container = executors[name]["container"]
            gpu = cuda is not None and "resources" in container and "accelerator" in container["resources"]
            ref, dig = cuda if gpu else (reference, digest)
            container["image"] = ref
            env = [dict(e) for e in container["env"]] if "env" in container else []
            env = [e for e in env if e.get("name") not in (IMAGE_DIGEST_ENV, IMAGE_REF_ENV)]
            container["env"] = [*env, {"name": IMAGE_DIGEST_ENV, "value": dig}, {"name": IMAGE_REF_ENV, "value": ref}]
        yield
    finally:
        spec.deployment_spec.CopyFrom(saved)
        if training is not None:
            training.string_value = saved_training


def images_of(pipeline: Any) -> set[str]:
    """Every executor's image (what a test or a reader checks after pinning)."""
    executors = pipeline.pipeline_spec.deployment_spec["executors"]
    return {executors[name]["container"]["image"] for name in executors}


def _shareable(root: Path) -> None:
    """Let the image's user (uid 1000) write under ``root``: group-writable, new files in its group.

    The containers join the caller's group (``group_add``); setgid keeps new files in it, so the
    caller can read and remove everything a step wrote.
    """
    root.chmod(0o2775)
    for path in root.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o2775)


RUNNERS = ("subprocess", "docker")


def check_runner(
    runner: str, isolated: bool, image: str | None, tracking_uri: str, root: Path
) -> tuple[str, str] | None:
    """Everything ``--runner`` needs, checked before a run writes anything: (reference, digest) of the
    step image for ``docker``, None for ``subprocess``."""
    if runner not in RUNNERS:
        raise FrugalError(f"--runner {runner!r}: expected one of {', '.join(RUNNERS)}")
    if runner == "subprocess":
        if image is not None:
            raise FrugalError("--image names the image of --runner docker; the subprocess runner runs this Python")
        return None
    if isolated:
        raise FrugalError("--isolated is for the subprocess runner; a container sees only its mounts already")
    if not tracking_uri.startswith(("http://", "https://")):
        raise FrugalError(
            f"--runner docker needs an MLflow server the containers can reach, not {tracking_uri}; start one "
            "(mlflow server --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000) and set "
            "MLFLOW_TRACKING_URI=http://127.0.0.1:5000"
        )
    storage = os.environ.get("OPTUNA_STORAGE", "")
    if storage.startswith("sqlite:///") and not Path(storage.removeprefix("sqlite:///")).resolve().is_relative_to(
        root.resolve()
    ):
        raise FrugalError(f"OPTUNA_STORAGE={storage} lies outside --root {root}, where the containers cannot see it; "
                          "unset it (a sqlite file under --root is the default) or use a database server")  # fmt: skip
    resolved = resolve_image(image)
    if resolved is None:
        raise FrugalError("--runner docker needs the step image: build it (`frugalrl image build`) or pass --image REF")
    require_local_image(resolved[0])
    return resolved[0], resolved[1]


def run_container_and_wait(client: Any, image: str, command: list[str], volumes: dict[str, Any],
                           **container_run_args: Any) -> int:  # fmt: skip
    """A step's container, its logs, and its real exit code.

    kfp.local's own version (kfp 2.17) starts the container with ``auto_remove``; when the container
    is gone before ``wait`` returns (a fast exit), it reports 0, so a step that failed counted as
    succeeded. Here the container is removed only after its exit code has been read."""
    container = client.containers.run(image=image, command=command, volumes=volumes, detach=True, stdout=True,
                                      stderr=True, **{**container_run_args, "auto_remove": False})  # fmt: skip
    try:
        for line in container.logs(stream=True):
            print(line.decode(errors="replace"), end="")
        return int(container.wait()["StatusCode"])
    finally:
        with contextlib.suppress(Exception):  # already gone is fine: the code was read
            container.remove(force=True)


def docker_runner(root: Path) -> Any:
    """kfp.local's DockerRunner for the step image: host network (MLflow on the host answers on the
    same address), the caller's group, and the MLflow, Optuna and frugalrl settings of this process."""
    from kfp.local import docker_task_handler

    docker_task_handler.run_docker_container = run_container_and_wait  # the handler looks it up at each step
    _shareable(root)
    environment = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES)}
    environment["HOME"] = "/home/frugal"
    return local.DockerRunner(network_mode="host", group_add=[str(os.getgid())], environment=environment)
