"""The multi-worker job on a cluster, either kind: ``distributed_manifest`` builds a TrainJob (Kubeflow Trainer
v2, the default) or a legacy PyTorchJob, validated; ``submit_job`` creates the config's ConfigMap and the job
through the Kubernetes API and follows it to its end. Apart from ``trainjob`` and ``pytorchjob`` because it
needs both (the PyTorchJob builds on ``trainjob``'s entry point and names)."""

from __future__ import annotations

import time
from typing import Any

from frugalrl.errors import ConfigError, PipelineFailed
from frugalrl.fusion.pytorchjob import pytorchjob_manifest, validate_manifest
from frugalrl.fusion.trainjob import GROUP, KINDS, PLURAL, VERSION, trainjob_manifest, validate_trainjob


def distributed_manifest(
    kind: str, name: str, config_map: str, workers: int, image: str, **options: Any
) -> dict[str, Any]:
    """The manifest of a multi-worker run as ``kind`` (``TrainJob``, the default, or ``PyTorchJob``), validated."""
    if kind == "TrainJob":
        manifest = trainjob_manifest(name, config_map, workers, image, **options)
        validate_trainjob(manifest)
        return manifest
    if kind == "PyTorchJob":
        manifest = pytorchjob_manifest(name, config_map, workers, image, **options)
        validate_manifest(manifest)
        return manifest
    raise ConfigError(f"job kind {kind!r}: one of {', '.join(KINDS)} (TrainJob: Kubeflow Trainer v2)")


def _config_map(node: Any) -> str | None:
    """The name of the ConfigMap mounted as volume ``config``, wherever the manifest keeps its volumes."""
    if isinstance(node, dict):
        if node.get("name") == "config" and isinstance(node.get("configMap"), dict):
            return node["configMap"].get("name")
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            if (found := _config_map(item)) is not None:
                return found
    return None


# kind -> (group, version, plural, condition that ends it well, label selecting its pods)
_API = {
    "TrainJob": (GROUP, VERSION, PLURAL, "Complete", "jobset.sigs.k8s.io/jobset-name"),
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs", "Succeeded", "training.kubeflow.org/job-name"),
}


def submit_job(manifest: dict[str, Any], config_yaml: str, namespace: str, poll_s: float = 15.0) -> str:
    """Validate, create the config's ConfigMap and the job (TrainJob or PyTorchJob) through the Kubernetes API;
    wait for the job's end state. Returns the job's name; a failed job is ``PipelineFailed``."""
    from kubernetes import client, config

    kind = manifest.get("kind")
    if kind not in _API:
        raise ConfigError(f"job kind {kind!r}: one of {', '.join(KINDS)}")
    if kind == "TrainJob":
        validate_trainjob(manifest)
    else:
        validate_manifest(manifest)
    group, version, plural, done, label = _API[kind]
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    name = manifest["metadata"]["name"]
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=_config_map(manifest)), data={"config.yaml": config_yaml}
    )
    client.CoreV1Api().create_namespaced_config_map(namespace, body)
    api = client.CustomObjectsApi()
    api.create_namespaced_custom_object(group, version, namespace, plural, manifest)
    while True:
        job = api.get_namespaced_custom_object(group, version, namespace, plural, name)
        conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
        if conditions.get(done) == "True":
            return name
        if conditions.get("Failed") == "True":
            raise PipelineFailed(
                f"{kind} {namespace}/{name} failed; see `kubectl -n {namespace} logs -l {label}={name}`"
            )
        time.sleep(poll_s)
