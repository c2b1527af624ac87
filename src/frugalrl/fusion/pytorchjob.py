"""Multi-worker training on a cluster: a Kubeflow Training Operator PyTorchJob.

``pytorchjob_manifest`` renders the job: one Master and ``workers - 1`` Worker replicas of the
frugalrl image running ``python -m frugalrl train CONFIG`` (the operator sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in every pod, which is what the training
loop reads), each with a GPU on the GPU node pool (node selector and toleration), NCCL
settings, the config in a ConfigMap, and the MLflow and Optuna connections from a Secret.

``validate_manifest`` checks it: the PyTorchJob fields against ``PYTORCHJOB_SCHEMA`` (the part
of the kubeflow.org/v1 CRD schema this job uses, written here, since the CRD itself is not
installable offline), and every replica's pod template against the Kubernetes schemas
(``kubernetes-validate``, strict). ``submit_pytorchjob`` creates it through the Kubernetes API
and follows it to Succeeded or Failed.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from frugalrl.errors import ConfigError, PipelineFailed

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"

# The kubeflow.org/v1 PyTorchJob fields, as the Training Operator's API documents them (its CRD and
# SDK models; read, not copied): unknown keys are refused so that a misspelled field fails here,
# and every documented field passes. Pod templates are checked by kubernetes-validate instead.
_REPLICA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
        "template": {"type": "object"},
    },
}
_RUN_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "cleanPodPolicy": {"enum": ["All", "Running", "None"]},
        "backoffLimit": {"type": "integer", "minimum": 0},
        "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
        "suspend": {"type": "boolean"},
        "managedBy": {"type": "string", "maxLength": 63},
        "schedulingPolicy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "minAvailable": {"type": "integer"},
                "minResources": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number"]}},
                "priorityClass": {"type": "string"},
                "queue": {"type": "string"},
                "scheduleTimeoutSeconds": {"type": "integer"},
            },
        },
    },
}
_ELASTIC_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "minReplicas": {"type": "integer", "minimum": 1},
        "maxReplicas": {"type": "integer", "minimum": 1},
        "maxRestarts": {"type": "integer", "minimum": 0},
        "nProcPerNode": {"type": "integer", "minimum": 1},
        "rdzvBackend": {"type": "string"},
        "rdzvHost": {"type": "string"},
        "rdzvId": {"type": "string"},
        "rdzvPort": {"type": "integer", "minimum": 1, "maximum": 65535},
        "rdzvConf": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            },
        },  # fmt: skip
        "standalone": {"type": "boolean"},
        "metrics": {"type": "array", "items": {"type": "object"}},
    },
}
PYTORCHJOB_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": f"{GROUP}/{VERSION}"},
        "kind": {"const": "PyTorchJob"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}},
        },
        "spec": {
            "type": "object",
            "required": ["pytorchReplicaSpecs"],
            "additionalProperties": False,
            "properties": {
                "runPolicy": _RUN_POLICY,
                "elasticPolicy": _ELASTIC_POLICY,
                "pytorchReplicaSpecs": {
                    "type": "object",
                    "required": ["Master"],
                    "additionalProperties": False,
                    "properties": {"Master": _REPLICA, "Worker": _REPLICA},
                },
                "nprocPerNode": {"type": "string"},
            },
        },
    },
}


def pytorchjob_manifest(
    name: str,
    config_map: str,
    workers: int,
    image: str,
    *,
    gpus_per_worker: int = 1,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    secret: str = "frugalrl-tracking",
    out_dir: str = "/runs",
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
        "command": ["python", "-m", "frugalrl", "train", "/config/config.yaml", "--out", f"{out_dir}/{name}"],
        "env": [
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
            {"name": "NCCL_IB_DISABLE", "value": "1"},
            {"name": "OMP_NUM_THREADS", "value": "1"},
            *({"name": k, "value": v} for k, v in (env or {}).items()),
        ],
        "envFrom": [{"secretRef": {"name": secret}}],  # MLFLOW_TRACKING_URI, OPTUNA_STORAGE: never inlined
        "resources": {
            "limits": {"nvidia.com/gpu": str(gpus_per_worker)} if gpus_per_worker else {},
            "requests": {"cpu": "2", "memory": "8Gi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/config", "readOnly": True},
            {"name": "runs", "mountPath": out_dir},
        ],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000},
    }
    pod = {
        "metadata": {"labels": {"app.kubernetes.io/part-of": "frugalrl", "frugalrl.io/job": name}},
        "spec": {
            "containers": [container],
            "volumes": [
                {"name": "config", "configMap": {"name": config_map}},
                {"name": "runs", **(output_volume or {"emptyDir": {}})},
            ],
            "securityContext": {"fsGroup": 1000},  # the mounted volume is writable by the container's user
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
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "frugalrl"}},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 2, "activeDeadlineSeconds": deadline_s},
            "pytorchReplicaSpecs": specs,
        },
    }


def validate_manifest(manifest: dict[str, Any], kubernetes_version: str = "1.30.0") -> None:
    """Raise ``ConfigError`` naming the first problem: PyTorchJob fields, then each pod template."""
    import jsonschema
    import kubernetes_validate

    try:
        jsonschema.validate(manifest, PYTORCHJOB_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise ConfigError(f"PyTorchJob {where}: {exc.message}") from None
    for role, replica in manifest["spec"]["pytorchReplicaSpecs"].items():
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{role.lower()}-template"},
                   "template": replica["template"]}  # fmt: skip
        try:
            kubernetes_validate.validate(wrapped, kubernetes_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise ConfigError(f"PyTorchJob {role} pod template {where}: {exc.message}") from None


def submit_pytorchjob(manifest: dict[str, Any], config_yaml: str, namespace: str, poll_s: float = 15.0) -> str:
    """Create the config's ConfigMap and the job through the Kubernetes API; wait for the job's end state."""
    from kubernetes import client, config

    validate_manifest(manifest)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    name = manifest["metadata"]["name"]
    config_map = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][0]["configMap"]
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=config_map["name"]), data={"config.yaml": config_yaml})
    client.CoreV1Api().create_namespaced_config_map(namespace, body)
    api = client.CustomObjectsApi()
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
    while True:
        job = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
        if conditions.get("Succeeded") == "True":
            return name
        if conditions.get("Failed") == "True":
            raise PipelineFailed(f"PyTorchJob {namespace}/{name} failed; see `kubectl -n {namespace} logs -l "
                                 f"training.kubeflow.org/job-name={name}`")  # fmt: skip
        time.sleep(poll_s)
