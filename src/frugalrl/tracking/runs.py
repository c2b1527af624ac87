"""One MLflow run: parameters, lineage tags, metrics, artifacts and the logged policy model."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from frugalrl import __version__
from frugalrl.config import ExperimentConfig, flatten
from frugalrl.errors import TrackingError
from frugalrl.tracking.provenance import lineage_tags
from frugalrl.tracking.store import check_tracking

FLUSH_METRICS = 2000  # queued metric values that trigger a send
FLUSH_SECONDS = 10.0  # or seconds since the last send: MLflow's UI lags by at most this


class RunTracker:
    """One MLflow run. Use as a context manager; the run ends FAILED if the block raises.

    ``pipeline_run_id`` names the pipeline run this run belongs to (its ``frugalrl.pipeline_run_id``
    tag); ``None`` leaves it to ``lineage_tags``' fallback.
    """

    def __init__(
        self,
        config: ExperimentConfig,
        run_id: str | None = None,
        run_name: str | None = None,
        pipeline_run_id: str | None = None,
        tags: dict[str, str] | None = None,
    ):
        import mlflow

        self.mlflow = mlflow
        self.config = config
        self.uri = check_tracking()
        mlflow.set_tracking_uri(self.uri)
        self._resume_id = run_id
        self._run_name = run_name or config.name
        self._pipeline_run_id = pipeline_run_id
        self.run_id: str | None = None
        self._pending: list[Any] = []  # metrics not sent yet (mlflow.entities.Metric)
        self._sent_at = time.monotonic()
        self._tags = dict(tags or {})
        self._logged_through: dict[str, int] = {}  # a resumed run: per key, the last step MLflow holds

    def __enter__(self) -> RunTracker:
        mlflow = self.mlflow
        try:
            mlflow.set_experiment(self.config.tracking.experiment)
            run = mlflow.start_run(run_id=self._resume_id, run_name=None if self._resume_id else self._run_name)
        except Exception as exc:
            raise TrackingError(
                f"MLflow store {self.uri} cannot start a run ({str(exc).splitlines()[0][:160]})"
            ) from None
        self.run_id = run.info.run_id
        if self._resume_id is None:
            params = {key: str(value)[:500] for key, value in flatten(self.config.to_dict()).items()}
            mlflow.log_params(params)
        mlflow.set_tags({**lineage_tags(self.config, self._pipeline_run_id), **self._tags})
        if self._resume_id is not None:
            client = self.mlflow.tracking.MlflowClient()
            for key in client.get_run(self.run_id).data.metrics:  # what the run logged before it stopped
                self._logged_through[key] = max(m.step for m in client.get_metric_history(self.run_id, key))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.flush()
        finally:
            self.mlflow.end_run(status="FINISHED" if exc_type is None else "FAILED")

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Queue one step's metrics; they go to MLflow in batches (``flush``).

        One call per update cost more than the update for small learners: SAC on InvertedPendulum
        updates every env step, and 15,000 single writes to a sqlite store tripled its time.
        """
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending += [
            Metric(key, float(value), now, step)
            for key, value in metrics.items()
            if isinstance(value, int | float) and np.isfinite(value)
            and step > self._logged_through.get(key, -1)  # a resume redoes steps MLflow holds: not sent twice
        ]  # fmt: skip
        if len(self._pending) >= FLUSH_METRICS or time.monotonic() - self._sent_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Send the queued metrics (at most 1,000 per request, MLflow's batch limit)."""
        self._sent_at = time.monotonic()
        if not self._pending or self.run_id is None:
            return
        client = self.mlflow.tracking.MlflowClient()
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), 1000):
            client.log_batch(self.run_id, metrics=pending[start : start + 1000])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def log_policy(self, policy: Any, input_example: np.ndarray) -> str:
        """Log the exported policy as an MLflow PyTorch model; returns its model URI.

        frugalrl's classes are pickled by value, so ``mlflow.pyfunc.load_model`` works in a
        Python that has torch, numpy and mlflow but not frugalrl.
        """
        import cloudpickle
        import mlflow.pytorch
        import torch

        import frugalrl

        # Pickle format and explicit requirements: skips torch.export and a slow
        # requirements-inference subprocess (together ~10 s per run on a small CPU).
        requirements = [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={np.__version__}"]
        cloudpickle.register_pickle_by_value(frugalrl)
        try:
            info = mlflow.pytorch.log_model(
                policy,
                name="policy",
                input_example=input_example,
                serialization_format="pickle",
                pip_requirements=requirements,
            )
        finally:
            cloudpickle.unregister_pickle_by_value(frugalrl)
        self.mlflow.set_tag("frugalrl.version", __version__)
        self.mlflow.set_tag("frugalrl.policy_uri", info.model_uri)
        return info.model_uri
