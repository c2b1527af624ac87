"""Executes a compiled pipeline (IR YAML) the way a Kubeflow cluster would, for the tests: no cluster runs here.

What a KFP backend does with the IR, and what this does instead:

- The DAG (task order, parameter and artifact passing, ParallelFor, sub-DAGs, retries, caching) is
  walked by kfp.local's orchestrator over the pipeline spec read back from the YAML, never over the
  Python pipeline object, so only what was compiled runs. Its cache is told one thing KFP's does:
  a Metrics output is metadata, not a file (kfp.local's cache took its missing file for a stale
  entry, so a cached step with metrics ran again on every run).
- Every executor runs in its own container of the image the IR names, with the IR's command and
  arguments (placeholders resolved as the KFP launcher resolves them: kfp.local's placeholder code).
- Its environment is what the IR declares and nothing of this process: the container's ``env``, each
  ``secretAsEnv`` of the platform spec resolved from ``ClusterStandIn.secrets`` (a required Secret or
  key that is missing fails the step, as a pod that cannot start; an optional one is left out), and
  the two variables a KFP launcher gives every step (``KFP_POD_NAME``, ``KFP_POD_UID``).
- Its CPU and memory limits become the container's limits; ``activeDeadlineSeconds`` kills it.
- It mounts only the artifact volume (the pipeline root, as the launcher's local view of the
  artifact store), on a user-defined Docker network where the cluster's services answer by name.

What only a real cluster can show: scheduling (requests against node capacity, node selectors,
tolerations, GPU devices), pulling from the registry, the service account's RBAC, and the object
store behind the artifact URIs. A step that asks for a GPU is refused here (this machine has none).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from frugalrl.ops.profiles import cpu_cores, memory_bytes


@dataclass
class ClusterStandIn:
    """What the cluster provides: its Secrets (name -> key -> value), the network its services share, the
    names they answer to (host -> address, e.g. ``postgres`` -> the network's gateway), the artifact volume."""

    network: str
    root: Path
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)
    executed: list[dict[str, Any]] = field(default_factory=list)  # what each step ran with (no secret values)


class SecretMissing(RuntimeError):
    """A required Secret or key is absent: the pod would never start (CreateContainerConfigError)."""


def load_ir(package: Path) -> tuple[Any, dict[str, Any]]:
    """The PipelineSpec and the Kubernetes platform spec's executors of a compiled pipeline."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    documents = list(yaml.safe_load_all(package.read_text()))
    spec = json_format.ParseDict(documents[0], pipeline_spec_pb2.PipelineSpec())
    platform = documents[1] if len(documents) > 1 else {}
    executors = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    return spec, executors


def secret_environment(platform: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The variables a pod gets from its ``secretAsEnv`` entries, or ``SecretMissing`` for a required one."""
    env: dict[str, str] = {}
    for entry in platform.get("secretAsEnv", []):
        name = entry.get("secretName") or entry["secretNameParameter"]["runtimeValue"]["constant"]
        for mapping in entry["keyToEnv"]:
            value = secrets.get(name, {}).get(mapping["secretKey"])
            if value is not None:
                env[mapping["envVar"]] = value
            elif not entry.get("optional", False):
                raise SecretMissing(f"secret {name!r} has no key {mapping['secretKey']!r}")
    return env


def run_compiled(package: Path, cluster: ClusterStandIn, arguments: dict[str, Any] | None = None) -> None:
    """Execute ``package`` on ``cluster``; raises RuntimeError naming the first step that failed."""
    from kfp import local
    from kfp.local import cache, pipeline_orchestrator, task_dispatcher

    spec, platform = load_ir(package)
    current: dict[str, str] = {}
    original = task_dispatcher.run_single_task_implementation

    def dispatch(**kwargs: Any) -> Any:  # which executor the next container is: the platform spec is per executor
        current["executor"] = kwargs["component_spec"].executor_label
        current["container"] = kwargs["executor_spec"].container
        return original(**kwargs)

    class PodHandler:
        def __init__(self, image: str, full_command: list[str], pipeline_root: str, runner: Any,
                     env_vars: dict[str, str] | None = None) -> None:  # fmt: skip
            self.image, self.command, self.env = image, full_command, dict(env_vars or {})

        def run(self) -> Any:
            from kfp.local import status

            code = _run_pod(cluster, current["executor"], current["container"], platform.get(current["executor"], {}),
                            self.image, self.command, self.env)  # fmt: skip
            return status.Status.SUCCESS if code == 0 else status.Status.FAILURE

    from kfp.local import docker_task_handler

    saved_handler, saved_cached = docker_task_handler.DockerTaskHandler, cache.LocalCache._deserialize_artifact
    task_dispatcher.run_single_task_implementation = dispatch
    docker_task_handler.DockerTaskHandler = PodHandler
    cache.LocalCache._deserialize_artifact = staticmethod(lambda data: _cached(data, saved_cached))
    try:
        local.init(runner=local.DockerRunner(), pipeline_root=str(cluster.root), raise_on_error=True,
                   enable_caching=True)  # fmt: skip
        with warnings.catch_warnings():  # kfp.local says resources "have no effect": here they are the limits
            warnings.filterwarnings("ignore", message=".*have no effect in the current local runner.*")
            pipeline_orchestrator.run_local_pipeline(pipeline_spec=spec, arguments=arguments or {})
    finally:
        task_dispatcher.run_single_task_implementation = original
        docker_task_handler.DockerTaskHandler = saved_handler
        cache.LocalCache._deserialize_artifact = saved_cached


def _cached(data: dict[str, Any], kfp_local: Any) -> Any:
    """A cached output as KFP's cache returns it: by its record, whether or not a Metrics file was written."""
    if data.get("schema_title") != "system.Metrics":
        return kfp_local(data)
    from kfp.dsl import executor

    runtime = {"name": data.get("name", ""), "uri": data.get("uri", ""), "metadata": data.get("metadata") or {},
               "type": {"schemaTitle": "system.Metrics"}}  # fmt: skip
    return executor.create_artifact_instance(runtime)


def _run_pod(cluster: ClusterStandIn, executor: str, container_spec: Any, platform: dict[str, Any], image: str,
             command: list[str], ir_env: dict[str, str]) -> int:  # fmt: skip
    """One step as one container: the IR's image, command and environment, its Secrets, its limits, its deadline."""
    import docker

    resources = container_spec.resources
    if resources.accelerator.resource_count or resources.accelerator.count:
        raise RuntimeError(f"{executor} asks for a GPU; this stand-in for a cluster has none")
    env = {**ir_env, **secret_environment(platform, cluster.secrets)}
    pod = f"{executor}-{uuid.uuid4().hex[:8]}"
    env.update(KFP_POD_NAME=pod, KFP_POD_UID=str(uuid.uuid4()))
    limits: dict[str, Any] = {}
    if resources.resource_cpu_limit:
        limits["nano_cpus"] = int(cpu_cores(resources.resource_cpu_limit) * 1e9)
    if resources.resource_memory_limit:
        limits["mem_limit"] = memory_bytes(resources.resource_memory_limit)
    cluster.executed.append({
        "executor": executor, "image": image, "env": sorted(env), "limits": limits,
        "cpu_request": resources.resource_cpu_request, "memory_request": resources.resource_memory_request,
        "deadline_s": platform.get("activeDeadlineSeconds"),
    })  # fmt: skip
    client = docker.from_env()
    container = client.containers.run(
        image, command, name=pod, detach=True, environment=env, network=cluster.network,
        extra_hosts=cluster.hosts, volumes={str(cluster.root): {"bind": str(cluster.root), "mode": "rw"}},
        **limits,
    )  # fmt: skip
    deadline = platform.get("activeDeadlineSeconds")
    timer = threading.Timer(float(deadline), lambda: container.kill()) if deadline else None
    if timer:
        timer.start()
    try:
        for line in container.logs(stream=True):
            print(line.decode(errors="replace"), end="")
        return int(container.wait()["StatusCode"])
    finally:
        if timer:
            timer.cancel()
        with contextlib.suppress(Exception):
            container.remove(force=True)
        client.close()


@contextlib.contextmanager
def tcp_forward(listen_host: str, target_port: int) -> Iterator[int]:
    """Forward ``listen_host:<free port>`` to ``127.0.0.1:target_port`` while open; yields the port.

    This machine's PostgreSQL listens on 127.0.0.1 only, where no container reaches; on a cluster it is a
    Service. The forwarder lets the containers reach it by the name ``postgres`` (``ClusterStandIn.hosts``)."""
    import socket

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((listen_host, 0))
    server.listen(64)
    stop = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()


@contextlib.contextmanager
def docker_network() -> Iterator[tuple[str, str]]:
    """A user-defined bridge network for one run; yields (name, the host's address on it)."""
    import docker

    client = docker.from_env()
    network = client.networks.create(f"frugalrl-test-{uuid.uuid4().hex[:8]}", driver="bridge")
    try:
        network.reload()
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        yield network.name, gateway
    finally:
        with contextlib.suppress(Exception):
            network.remove()
        client.close()


@contextlib.contextmanager
def mlflow_service(image: str, network: str, backend_uri: str, hosts: dict[str, str]) -> Iterator[str]:
    """``mlflow server`` from the step image on ``network`` as the service ``mlflow`` (port 5000), artifacts
    proxied to its own volume; yields the URL this process reaches it on (a port published on 127.0.0.1)."""
    import docker

    from .conftest import wait_until_up

    client = docker.from_env()
    name = f"mlflow-{uuid.uuid4().hex[:8]}"
    container = client.containers.run(
        image, ["python3", "-m", "mlflow", "server", "--host", "0.0.0.0", "--port", "5000", "--workers", "1",
                "--backend-store-uri", backend_uri, "--artifacts-destination", "/home/frugal/mlartifacts",
                # the Host headers it answers: its service name in the network, this process's published port
                "--allowed-hosts", "mlflow,mlflow:5000,127.0.0.1,127.0.0.1:*,localhost,localhost:*"],
        name=name, detach=True, network=network, extra_hosts=hosts, ports={"5000/tcp": ("127.0.0.1", None)},
        networking_config={network: client.api.create_endpoint_config(aliases=["mlflow"])},  # the Service's name
    )  # fmt: skip
    try:
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"]["5000/tcp"][0]["HostPort"]
        url = f"http://127.0.0.1:{port}"

        def exited() -> bool:
            container.reload()
            return container.status == "exited"

        wait_until_up(f"{url}/health", exited, lambda: container.logs().decode(errors="replace"), "mlflow server")
        yield url
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
        client.close()


def step_stores(root: Path) -> list[Path]:
    """Tracking or Optuna stores a step left on the artifact volume (none may: they belong to the server)."""
    return sorted(p for p in root.rglob("*") if p.name in ("mlflow.db", "optuna.db", "mlruns") or p.suffix == ".db")
