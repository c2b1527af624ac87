"""Where a step lands on a cluster and what it is given there: one ``Placement`` for every task of a pipeline.

Each task goes through exactly one of ``light`` (evaluation, registration, best trial, race decision, report),
``cpu`` (collection; training, tuning and pretraining on the CPU pool), ``race`` (a race's runs, one core each)
or ``gpu`` (training and pretraining whose config runs on a GPU), which set its requests, limits and deadline
from the profile's ``resources``, and give it the tracking Secret: ``MLFLOW_TRACKING_URI`` (required), the
server's credentials when the Secret holds them, and the artifact store's keys when the profile names an
``artifact_secret_name``. The Secret's name also travels as a plain variable (``FRUGALRL_TRACKING_SECRET``), so
a step that finds no tracking URI can say which Secret to create (``frugalrl.tracking.store``). Optuna steps
also take ``OPTUNA_STORAGE``.

kfp.local ignores all of this (it runs steps with the host's environment); a compiled pipeline carries it
to the cluster, and ``tests/cluster_executor.py`` executes the compiled IR the way a cluster would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kfp import dsl, kubernetes

from frugalrl.ops.profiles import ClusterSettings, Resources, StageResources
from frugalrl.tracking.store import TRACKING_SECRET_ENV

TRACKING_URI_KEY = "MLFLOW_TRACKING_URI"
TRACKING_AUTH_KEYS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
OPTUNA_KEY = "OPTUNA_STORAGE"
ARTIFACT_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MLFLOW_S3_ENDPOINT_URL")


@dataclass(frozen=True)
class Placement:
    """Puts tasks on their pool with the profile's resources and the cluster's Secrets.

    ``gpu_node_selector`` and ``gpu_toleration`` are the pipeline's parameters (a run may name other pools)."""

    resources: Resources
    cluster: ClusterSettings
    gpu_node_selector: Any = None
    gpu_toleration: Any = None

    def light(self, task: dsl.PipelineTask) -> dsl.PipelineTask:
        return self._place(task, self.resources.light)

    def cpu(self, task: dsl.PipelineTask) -> dsl.PipelineTask:
        return self._place(task, self.resources.cpu)

    def race(self, pool: str, task: dsl.PipelineTask) -> dsl.PipelineTask:
        """A race's run: one core on the CPU pool (the ``race`` class), or the GPU class where it trains on one."""
        return self.gpu(task) if pool == "gpu" else self._place(task, self.resources.race)

    def gpu(self, task: dsl.PipelineTask) -> dsl.PipelineTask:
        res = self.resources.gpu
        task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(res.gpu_count)
        kubernetes.add_node_selector_json(task, self.gpu_node_selector)
        kubernetes.add_toleration_json(task, self.gpu_toleration)
        return self._place(task, res)

    def watcher(self, task: dsl.PipelineTask) -> dsl.PipelineTask:
        """A step that submits a multi-worker job and waits for it: light resources, the GPU class's deadline
        (it lives as long as the job it watches)."""
        return self._place(task, self.resources.light.model_copy(update={"timeout_s": self.resources.gpu.timeout_s}))

    def on(self, pool: str, task: dsl.PipelineTask) -> dsl.PipelineTask:
        """``pool`` is ``cpu`` or ``gpu`` (``Profile.pool``)."""
        return self.gpu(task) if pool == "gpu" else self.cpu(task)

    def optuna(self, task: dsl.PipelineTask) -> dsl.PipelineTask:
        """A step that opens the shared study: ``OPTUNA_STORAGE`` from the tracking Secret, required."""
        kubernetes.use_secret_as_env(task, self.cluster.tracking_secret_name, {OPTUNA_KEY: OPTUNA_KEY})
        return task

    def _place(self, task: dsl.PipelineTask, res: StageResources) -> dsl.PipelineTask:
        task.set_cpu_request(res.cpu_request).set_cpu_limit(res.cpu_limit)
        task.set_memory_request(res.memory_request).set_memory_limit(res.memory_limit)
        kubernetes.set_timeout(task, res.timeout_s)
        secret = self.cluster.tracking_secret_name
        kubernetes.use_secret_as_env(task, secret, {TRACKING_URI_KEY: TRACKING_URI_KEY})
        kubernetes.use_secret_as_env(task, secret, {k: k for k in TRACKING_AUTH_KEYS}, optional=True)
        if self.cluster.artifact_secret_name:
            kubernetes.use_secret_as_env(task, self.cluster.artifact_secret_name, {k: k for k in ARTIFACT_KEYS})
        if self.cluster.image_pull_secret_name:
            kubernetes.set_image_pull_secrets(task, [self.cluster.image_pull_secret_name])
        task.set_env_variable(TRACKING_SECRET_ENV, secret)
        return task


def default_placement() -> Placement:
    """The training pipelines' placement (``pipeline compile --config``): the default resources and Secret
    names, every step on the CPU pool (their config is a run-time parameter: a profile places GPU steps)."""
    return Placement(Resources(), ClusterSettings())
