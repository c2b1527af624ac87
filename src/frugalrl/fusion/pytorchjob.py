"""Multi-worker training on a cluster, the legacy option: a Kubeflow Training Operator PyTorchJob.

The Training Operator (``kubeflow.org/v1``) is in maintenance; its successor, Kubeflow Trainer v2, runs
the default job kind, the TrainJob (``frugalrl.fusion.trainjob``). Both run the same entry point.

``pytorchjob_manifest`` renders the job: one Master and ``workers - 1`` Worker replicas of the frugalrl
image, each running ``torchrun -m frugalrl train CONFIG`` (``trainjob.torchrun_command``; the operator
sets the ``PET_*`` variables torchrun reads), with ``gpus_per_worker`` GPUs and as many processes on the
GPU node pool (node selector and toleration), NCCL settings, the config in a ConfigMap, and the MLflow
and Optuna connections from a Secret.

``validate_manifest`` reads a manifest through the Training Operator's published models
(``kubeflow-training``: ``KubeflowOrgV1PyTorchJob`` and the types it names), field by field: an unknown
key, a wrong type or a missing required field is named by its path. The models leave enums and
bounds unchecked (plain strings and integers there), so those are checked here from the CRD; every
replica's pod template is checked against the Kubernetes schemas (``kubernetes-validate``, strict).
``fusion.jobs.submit_job`` creates it through the Kubernetes API and follows it to Succeeded or Failed.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from frugalrl.errors import ConfigError
from frugalrl.fusion import trainjob
from frugalrl.fusion.trainjob import check_mounted_names, check_name, torchrun_command

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# The CRD's enums and bounds, which the published models do not check (their fields are plain str/int).
_ENUMS = {"restartPolicy": {"Always", "OnFailure", "Never", "ExitCode"}, "cleanPodPolicy": {"All", "Running", "None"}}
_MINIMA = {"replicas": 0, "backoffLimit": 0, "activeDeadlineSeconds": 1, "ttlSecondsAfterFinished": 0,
           "minReplicas": 1, "maxReplicas": 1, "maxRestarts": 0, "nProcPerNode": 1, "rdzvPort": 1}  # fmt: skip
# Scalars as the models type them; Quantity is named by the models but not defined in the package.
_SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float),
                                         "datetime": (str,), "Quantity": (str, int, float)}  # fmt: skip
# A type the models name that the package does not define; the Kubernetes client's is the same API type.
_RENAMED = {"K8sIoApiAutoscalingV2MetricSpec": "V2MetricSpec"}
_OPAQUE = {"V1PodTemplateSpec", "object"}  # pod templates: kubernetes-validate checks them, for the cluster's version


def pytorchjob_manifest(
    name: str,
    config_map: str,
    workers: int,
    image: str,
    *,
    gpus_per_worker: int = 1,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    secret: str = trainjob.TRACKING_SECRET,
    out_dir: str = trainjob.OUT_DIR,
    deadline_s: int = 24 * 3600,
    env: dict[str, str] | None = None,
    output_volume: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The PyTorchJob for ``workers`` workers training the config held in ConfigMap ``config_map``.

    The run directory goes to ``out_dir``, a volume the non-root container can write:
    ``output_volume`` is its Kubernetes volume source (default ``{"emptyDir": {}}``, which lives as
    long as the pod; pass ``{"persistentVolumeClaim": {"claimName": ...}}`` to keep the files). What
    lasts is in MLflow: the run logs its metrics, policy and files there as it trains.
    """
    if workers < 2:
        raise ConfigError(f"a PyTorchJob is for 2 or more workers, got {workers}; train a single worker directly")
    container = {
        "name": "pytorch",  # the operator looks for this container name
        "image": image,
        "command": torchrun_command([trainjob.CONFIG_FILE, "--out", f"{out_dir}/{name}"]),
        "env": [{"name": k, "value": v} for k, v in {**trainjob.NCCL_ENV, **(env or {})}.items()],
        "envFrom": [{"secretRef": {"name": secret}}],  # MLFLOW_TRACKING_URI, OPTUNA_STORAGE: never inlined
        "resources": {
            "limits": {"nvidia.com/gpu": str(gpus_per_worker)} if gpus_per_worker else {},
            "requests": dict(trainjob.REQUESTS),
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/config", "readOnly": True},
            {"name": "runs", "mountPath": out_dir},
        ],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": trainjob.USER},
    }
    pod = {
        "metadata": {"labels": {**trainjob.LABELS, "frugalrl.io/job": name}},
        "spec": {
            "containers": [container],
            "volumes": [
                {"name": "config", "configMap": {"name": config_map}},
                {"name": "runs", **(output_volume or {"emptyDir": {}})},
            ],
            "securityContext": {"fsGroup": trainjob.USER},  # the mounted volume is writable by the container's user
            "nodeSelector": node_selector or {},
            "tolerations": tolerations or [],
        },
    }
    specs = {
        "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod},
        "Worker": {"replicas": workers - 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(pod)},
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": dict(trainjob.LABELS)},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 2, "activeDeadlineSeconds": deadline_s},
            "nprocPerNode": str(max(gpus_per_worker, 1)),  # torchrun processes per pod (PET_NPROC_PER_NODE)
            "pytorchReplicaSpecs": specs,
        },
    }


def _where(path: tuple[Any, ...]) -> str:
    return f"PyTorchJob {'/'.join(str(p) for p in path) or '(top)'}"


def _read(value: Any, kind: str, path: tuple[Any, ...], in_map: bool = False) -> Any:
    """``value`` as the published model type ``kind`` names (an openapi-generator type string), built.

    What the package's own deserializer does (``ApiClient.deserialize``), but strict: it drops unknown
    keys and converts types silently; here an unknown key, a wrong type or a missing required field
    (the models' constructors refuse it) is a ``ConfigError`` naming its path.
    """
    from kubeflow.training import models

    if kind.startswith("list["):
        if not isinstance(value, list):
            raise ConfigError(f"{_where(path)}: a list expected, got {type(value).__name__}")
        return [_read(item, kind[5:-1], (*path, i)) for i, item in enumerate(value)]
    if kind.startswith("dict("):
        if not isinstance(value, dict):
            raise ConfigError(f"{_where(path)}: a mapping expected, got {type(value).__name__}")
        inner = kind[5:-1].split(", ", 1)[1]
        return {key: _read(item, inner, (*path, key), in_map=True) for key, item in value.items()}
    if kind in _OPAQUE:
        return value
    if kind in _SCALARS:
        allowed = (str, int, float) if kind == "str" and in_map else _SCALARS[kind]  # labels, quantities: 1 or "1"
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ConfigError(f"{_where(path)}: {value!r} is not of type {kind}")
        return value
    model = getattr(models, _RENAMED.get(kind, kind))
    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path)}: a mapping expected ({kind}), got {type(value).__name__}")
    fields = {model.attribute_map[attr]: (attr, type_) for attr, type_ in model.openapi_types.items()}
    built = {}
    for key, item in value.items():
        if key not in fields:
            raise ConfigError(f"{_where((*path, key))}: unknown field (the published model {model.__name__} has "
                              f"{', '.join(sorted(fields))})")  # fmt: skip
        if item is None:
            continue
        if key in _ENUMS and model.__name__.startswith("KubeflowOrgV1") and item not in _ENUMS[key]:
            raise ConfigError(f"{_where((*path, key))}: {item!r} is not one of {', '.join(sorted(_ENUMS[key]))}")
        built[fields[key][0]] = _read(item, fields[key][1], (*path, key))
        if key in _MINIMA and model.__name__.startswith("KubeflowOrgV1") and item < _MINIMA[key]:
            raise ConfigError(f"{_where((*path, key))}: {item} is less than the minimum of {_MINIMA[key]}")
    try:
        return model(**built)
    except ValueError as exc:  # the constructors' client-side validation: "Invalid value for `x`, must not be `None`"
        attr = re.search(r"`(\w+)`", str(exc))
        key = model.attribute_map.get(attr[1], attr[1]) if attr else "?"
        raise ConfigError(f"{_where((*path, key))}: required, missing") from None


def validate_manifest(manifest: dict[str, Any], kubernetes_version: str = "1.30.0") -> None:
    """Raise ``ConfigError`` naming the first problem: PyTorchJob fields, then each pod template."""
    import kubernetes_validate

    kind = manifest.get("kind")
    if kind == "TrainJob":
        raise ConfigError("a TrainJob, not a PyTorchJob; check it with `frugalrl trainjob validate FILE`")
    if manifest.get("apiVersion") != f"{GROUP}/{VERSION}" or kind != "PyTorchJob":
        raise ConfigError(f"PyTorchJob apiVersion/kind: {manifest.get('apiVersion')}/{kind}, not "
                          f"{GROUP}/{VERSION}/PyTorchJob; render one with `frugalrl pytorchjob render`")  # fmt: skip
    for key in ("metadata", "spec"):
        if not isinstance(manifest.get(key), dict):
            problem = "required, missing" if manifest.get(key) is None else "a mapping expected"
            raise ConfigError(f"{_where((key,))}: {problem}")
    check_name(manifest["metadata"].get("name"), "PyTorchJob", DNS_1123)
    check_mounted_names(manifest["spec"], "PyTorchJob")
    _read(manifest, "KubeflowOrgV1PyTorchJob", ())
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    if "Master" not in specs or set(specs) - {"Master", "Worker"}:
        raise ConfigError(f"{_where(('spec', 'pytorchReplicaSpecs'))}: {', '.join(specs) or 'nothing'}; "
                          "a Master and, optionally, Workers")  # fmt: skip
    for role, replica in specs.items():
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{role.lower()}-template"},
                   "template": replica.get("template") or {}}  # fmt: skip
        try:
            kubernetes_validate.validate(wrapped, kubernetes_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise ConfigError(f"PyTorchJob {role} pod template {where}: {exc.message}") from None
