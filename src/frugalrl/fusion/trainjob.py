"""Multi-worker training on a cluster: a Kubeflow Trainer v2 TrainJob (the default; PyTorchJob is the legacy option).

``trainjob_manifest`` builds the job from the Trainer's published API models (``kubeflow-trainer-api``,
``trainer.kubeflow.org/v1alpha1``): the ``torch-distributed`` ClusterTrainingRuntime (``spec.runtimeRef``),
``workers`` nodes of the step image by digest with ``gpus_per_node`` GPUs and one torchrun process per GPU,
the ``torchrun`` entry point every multi-worker run uses (``torchrun_command``), NCCL settings and the
tracking Secret's keys as environment, and a runtime patch of the runtime's ``node`` job: the config
ConfigMap, the output volume, the GPU pool's node selector and tolerations, a non-root security context.

``validate_trainjob`` reads a manifest back through the same models, field by field (an unknown or
misspelled field is refused, which the models alone would silently drop), then the project's rules:
2 or more nodes, the image by digest, the torchrun entry point. ``fusion.jobs`` builds either job kind
and creates it on a cluster.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from frugalrl.errors import ConfigError
from frugalrl.ops.images import REFERENCE

GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
RUNTIME = "torch-distributed"  # the ClusterTrainingRuntime Kubeflow Trainer installs for PyTorch
NODE = "node"  # the torch runtime's replicated job, and its training container
MANAGER = "frugalrl.io/render"  # who owns the runtime patch (spec.runtimePatches[].manager)
KINDS = ("TrainJob", "PyTorchJob")  # what the pipeline's distributed stage can create; the first is the default

# What both job kinds share: where the config and the run directory are, the GPU pool, the tracking Secret.
CONFIG_FILE = "/config/config.yaml"
OUT_DIR = "/runs"
GPU_POOL_SELECTOR = {"cloud.google.com/gke-nodepool": "gpu-pool"}  # infra/terraform/gke-gpu-node-pool
GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
TRACKING_SECRET = "frugalrl-tracking"
TRACKING_KEYS = {"MLFLOW_TRACKING_URI": False, "OPTUNA_STORAGE": True}  # key -> optional (a run may not tune)
NCCL_ENV = {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "1"}
REQUESTS = {"cpu": "2", "memory": "8Gi"}
USER = 1000  # the image's non-root user; fsGroup makes the mounted volumes writable to it
LABELS = {"app.kubernetes.io/part-of": "frugalrl"}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # TrainJob names start with a letter
# ConfigMap and PersistentVolumeClaim names: DNS-1123 subdomains (dot-separated labels, at most 253)
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# volume source -> the key holding the object's name, and the render option that sets it
_MOUNTED = {"configMap": ("name", "--config-map"), "persistentVolumeClaim": ("claimName", "--output-claim")}


def torchrun_command(
    train_args: list[str], *, python: str | None = None, nproc_per_node: int | None = None, standalone: bool = False
) -> list[str]:
    """``frugalrl train TRAIN_ARGS`` under torchrun: the entry point of every multi-worker run.

    On a cluster (``python`` None) the image's ``torchrun``; node count, node rank, processes per node
    and the master's address come from the ``PET_*`` variables Kubeflow Trainer sets in a TrainJob's
    pods (and the Training Operator, 1.8 or later, in a PyTorchJob's). On one machine
    (``fusion.launch.torchrun``): ``PYTHON -m torch.distributed.run --standalone --nproc-per-node=N``.
    """
    launcher = [python, "-m", "torch.distributed.run"] if python else ["torchrun"]
    options = ["--standalone"] if standalone else []
    if nproc_per_node:
        options.append(f"--nproc-per-node={nproc_per_node}")
    return [*launcher, *options, "--max-restarts=0", "-m", "frugalrl", "train", *train_args]


def is_torchrun_entry(command: Any) -> bool:
    """Whether a container command is ``torchrun_command``'s: torchrun running ``-m frugalrl train``."""
    if not isinstance(command, list) or not command:
        return False
    launched = command[:1] == ["torchrun"] or command[1:3] == ["-m", "torch.distributed.run"]
    return launched and any(command[i : i + 3] == ["-m", "frugalrl", "train"] for i in range(len(command)))


def require_digest(image: Any, kind: str = "TrainJob") -> str:
    """The image reference, or one line when it names no digest (a tag can be pushed over; a digest cannot)."""
    if not (isinstance(image, str) and REFERENCE.match(image) and "@sha256:" in image):
        raise ConfigError(
            f"{kind} image {image!r} is not pinned by digest; give NAME@sha256:<64 hex> "
            "(`frugalrl image push --registry HOST:PORT --flavor cuda` prints it)"
        )
    return image


def check_name(name: Any, kind: str, pattern: re.Pattern[str] = DNS_1035) -> None:
    """One line unless ``name`` is a Kubernetes name of the given pattern (DNS-1035 labels start with a letter)."""
    if not (isinstance(name, str) and len(name) <= 63 and pattern.match(name)):
        first = "a letter" if pattern is DNS_1035 else "a letter or digit"
        raise ConfigError(f"{kind} metadata/name {name!r}: lowercase letters, digits and '-', at most 63, "
                          f"starting with {first} and ending with a letter or digit")  # fmt: skip


def check_mounted_names(manifest: Any, kind: str) -> None:
    """One line unless every ConfigMap and PersistentVolumeClaim the job mounts has a Kubernetes object name:
    the API server would refuse such a job only when it is created, or the pod would wait for it forever."""
    if isinstance(manifest, dict):
        for source, (key, option) in _MOUNTED.items():
            mounted = manifest.get(source)
            if isinstance(mounted, dict):
                name = mounted.get(key)
                if not (isinstance(name, str) and len(name) <= 253 and DNS_1123_SUBDOMAIN.match(name)):
                    raise ConfigError(f"{kind} volume {source} {name!r}: not a Kubernetes object name (lowercase "
                                      f"letters, digits, '-' and '.', at most 253); fix {option}")  # fmt: skip
        manifest = list(manifest.values())
    if isinstance(manifest, list):
        for item in manifest:
            check_mounted_names(item, kind)


def trainjob_manifest(
    name: str,
    config_map: str,
    workers: int,
    image: str,
    *,
    gpus_per_node: int = 1,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    secret: str = TRACKING_SECRET,
    out_dir: str = OUT_DIR,
    output_claim: str | None = None,
    env: dict[str, str] | None = None,
    deadline_s: int = 24 * 3600,
    runtime: str = RUNTIME,
) -> dict[str, Any]:
    """The TrainJob for ``workers`` nodes training the config held in ConfigMap ``config_map``.

    The run directory goes to ``out_dir`` on the output volume: PersistentVolumeClaim ``output_claim``
    (ReadWriteMany: every node mounts it; rank 0 alone writes), or an ``emptyDir`` that lives as long as
    the pod when None. What lasts is in MLflow either way: the run logs its metrics, policy and files there.
    """
    from kubeflow_trainer_api import models as m

    check_name(name, "TrainJob")
    if workers < 2:
        raise ConfigError(f"a TrainJob is for 2 or more workers, got {workers}; train a single worker directly")
    if gpus_per_node < 0:
        raise ConfigError(f"gpus_per_node {gpus_per_node}: 0 or more")
    require_digest(image)
    if output_claim == "":  # not None: an emptyDir would lose the run directories with the pod
        raise ConfigError("TrainJob --output-claim '': name the ReadWriteMany claim the run directories go to")
    quantity = m.IoK8sApimachineryPkgApiResourceQuantity
    keys = [
        m.IoK8sApiCoreV1EnvVar(name=key, value_from=m.IoK8sApiCoreV1EnvVarSource(
            secret_key_ref=m.IoK8sApiCoreV1SecretKeySelector(name=secret, key=key, optional=optional or None)))
        for key, optional in TRACKING_KEYS.items()
    ]  # fmt: skip
    trainer = m.TrainerV1alpha1Trainer(
        image=image,
        command=torchrun_command([CONFIG_FILE, "--out", f"{out_dir}/{name}"]),
        num_nodes=workers,
        num_proc_per_node=max(gpus_per_node, 1),  # one process per GPU (PET_NPROC_PER_NODE)
        resources_per_node=m.IoK8sApiCoreV1ResourceRequirements(
            limits={"nvidia.com/gpu": quantity(str(gpus_per_node))} if gpus_per_node else None,
            requests={k: quantity(v) for k, v in REQUESTS.items()},
        ),
        # the trainer takes env, not envFrom: each tracking key by reference to the Secret, never inlined
        env=[*(m.IoK8sApiCoreV1EnvVar(name=k, value=v) for k, v in {**NCCL_ENV, **(env or {})}.items()), *keys],
    )
    runs = (
        m.IoK8sApiCoreV1Volume(name="runs", persistent_volume_claim=m.IoK8sApiCoreV1PersistentVolumeClaimVolumeSource(
            claim_name=output_claim))
        if output_claim
        else m.IoK8sApiCoreV1Volume(name="runs", empty_dir=m.IoK8sApiCoreV1EmptyDirVolumeSource())
    )  # fmt: skip
    pod = m.TrainerV1alpha1PodSpecPatch(
        containers=[m.TrainerV1alpha1ContainerPatch(
            name=NODE,
            volume_mounts=[m.IoK8sApiCoreV1VolumeMount(name="config", mount_path="/config", read_only=True),
                           m.IoK8sApiCoreV1VolumeMount(name="runs", mount_path=out_dir)],
            security_context=m.IoK8sApiCoreV1SecurityContext(allow_privilege_escalation=False, run_as_non_root=True,
                                                             run_as_user=USER),
        )],
        volumes=[m.IoK8sApiCoreV1Volume(name="config", config_map=m.IoK8sApiCoreV1ConfigMapVolumeSource(
            name=config_map)), runs],
        security_context=m.IoK8sApiCoreV1PodSecurityContext(fs_group=USER),
        node_selector=node_selector or None,
        tolerations=[m.IoK8sApiCoreV1Toleration.from_dict(t) for t in tolerations or []] or None,
    )  # fmt: skip
    template = m.TrainerV1alpha1PodTemplatePatch(
        metadata=m.IoK8sApimachineryPkgApisMetaV1ObjectMeta(labels={**LABELS, "frugalrl.io/job": name}), spec=pod
    )
    node = m.TrainerV1alpha1ReplicatedJobPatch(
        name=NODE, template=m.TrainerV1alpha1JobTemplatePatch(spec=m.TrainerV1alpha1JobSpecPatch(template=template))
    )
    patch = m.TrainerV1alpha1RuntimePatch(
        manager=MANAGER,
        training_runtime_spec=m.TrainerV1alpha1TrainingRuntimeSpecPatch(
            template=m.TrainerV1alpha1JobSetTemplatePatch(spec=m.TrainerV1alpha1JobSetSpecPatch(replicated_jobs=[node]))
        ),
    )
    job = m.TrainerV1alpha1TrainJob(
        api_version=f"{GROUP}/{VERSION}",
        kind="TrainJob",
        metadata=m.IoK8sApimachineryPkgApisMetaV1ObjectMeta(name=name, labels=dict(LABELS)),
        spec=m.TrainerV1alpha1TrainJobSpec(
            runtime_ref=m.TrainerV1alpha1RuntimeRef(name=runtime, api_group=GROUP, kind="ClusterTrainingRuntime"),
            trainer=trainer,
            runtime_patches=[patch],
            active_deadline_seconds=deadline_s,
        ),
    )
    # to_dict: pydantic's model_dump(by_alias=True, exclude_none=True), with the quantities (oneOf wrappers) as values
    return job.to_dict()


def _where(kind: str, path: tuple[Any, ...]) -> str:
    return f"{kind} {'/'.join(str(p) for p in path) or '(top)'}"


def _read(value: Any, annotation: Any, path: tuple[Any, ...]) -> None:
    """Check ``value`` against a field annotation of the Trainer's pydantic models, naming the first problem's path.

    The generated models ignore unknown keys (and accept Python names beside the Kubernetes ones), so
    every key is matched here against the fields' Kubernetes names; each model's own ``from_dict`` then
    checks its values (types, required fields, enums), children before parents, so the path is exact.
    """
    from pydantic import BaseModel, ValidationError

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _read(value, options[0], path)
        return  # a union of scalars: the parent's from_dict checks it
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{_where('TrainJob', path)}: a list expected, got {type(value).__name__}")
        for i, item in enumerate(value):
            _read(item, args[0], (*path, i))
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{_where('TrainJob', path)}: a mapping expected, got {type(value).__name__}")
        for key, item in value.items():
            _read(item, args[1], (*path, key))
        return
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return  # a scalar: the parent's from_dict checks it
    if "actual_instance" in annotation.model_fields:  # a oneOf (quantity, int-or-string): the model's own parser
        try:
            annotation.from_dict(value)
        except ValueError:
            allowed = " or ".join(sorted(annotation.model_fields["one_of_schemas"].default))
            raise ConfigError(f"{_where('TrainJob', path)}: {value!r} is not a {allowed}") from None
        return
    if not isinstance(value, dict):
        raise ConfigError(f"{_where('TrainJob', path)}: a mapping expected, got {type(value).__name__}")
    fields = {(f.alias or n): f for n, f in annotation.model_fields.items()}
    for key, item in value.items():
        if key not in fields:
            raise ConfigError(f"{_where('TrainJob', (*path, key))}: unknown field (the TrainJob API's "
                              f"{annotation.__name__} has {', '.join(sorted(fields))})")  # fmt: skip
        if item is not None:
            _read(item, fields[key].annotation, (*path, key))
    for key, field in fields.items():
        if field.is_required() and value.get(key) is None:
            raise ConfigError(f"{_where('TrainJob', (*path, key))}: required, missing")
    try:
        annotation.from_dict(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(f"{_where('TrainJob', (*path, *error['loc']))}: {error['msg']}") from None


def validate_trainjob(manifest: dict[str, Any]) -> None:
    """Raise ``ConfigError`` naming the first problem: the TrainJob API's fields, then the project's rules."""
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    kind = manifest.get("kind")
    if kind == "PyTorchJob":
        raise ConfigError("a PyTorchJob, not a TrainJob; check it with `frugalrl pytorchjob validate FILE`")
    if manifest.get("apiVersion") != f"{GROUP}/{VERSION}" or kind != "TrainJob":
        raise ConfigError(f"TrainJob apiVersion/kind: {manifest.get('apiVersion')}/{kind}, not "
                          f"{GROUP}/{VERSION}/TrainJob; render one with `frugalrl trainjob render`")  # fmt: skip
    for key in ("metadata", "spec"):  # optional in the models, not on a cluster
        if manifest.get(key) is None:
            raise ConfigError(f"{_where('TrainJob', (key,))}: required, missing")
    _read(manifest, TrainerV1alpha1TrainJob, ())
    check_name(manifest["metadata"].get("name"), "TrainJob")
    check_mounted_names(manifest["spec"], "TrainJob")
    trainer = manifest["spec"].get("trainer") or {}
    nodes = trainer.get("numNodes")
    if nodes is None or nodes < 2:
        raise ConfigError(f"TrainJob spec/trainer/numNodes: {nodes}; multi-worker training needs 2 or more "
                          "(train a single worker directly: frugalrl train CONFIG)")  # fmt: skip
    require_digest(trainer.get("image"))
    if not is_torchrun_entry(trainer.get("command")):
        raise ConfigError("TrainJob spec/trainer/command: not the torchrun entry point (torchrun ... -m frugalrl "
                          "train CONFIG --out DIR); render the job with `frugalrl trainjob render`")  # fmt: skip
