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

_REPLICA = {
    "type": "object",
    "required": ["replicas", "restartPolicy", "template"],
    "additionalProperties": False,
    "properties": {
        "replicas": {"type": "integer", "minimum": 1},
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
        "template": {"type": "object", "required": ["spec"]},
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
                "runPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "cleanPodPolicy": {"enum": ["All", "Running", "None"]},
                        "backoffLimit": {"type": "integer", "minimum": 0},
                        "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                    },
                },
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
) -> dict[str, Any]:
    """The PyTorchJob for ``workers`` workers training the config held in ConfigMap ``config_map``."""
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
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000},
    }
    pod = {
        "metadata": {"labels": {"app.kubernetes.io/part-of": "frugalrl", "frugalrl.io/job": name}},
        "spec": {
            "containers": [container],
            "volumes": [{"name": "config", "configMap": {"name": config_map}}],
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
