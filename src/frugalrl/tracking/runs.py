"""One MLflow run: parameters, lineage tags, metrics, artifacts and the logged policy model."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from frugalrl import __version__
from frugalrl.config import ExperimentConfig, flatten
from frugalrl.credentials import shown
from frugalrl.errors import TrackingError
from frugalrl.tracking.models import log_policy_model
from frugalrl.tracking.offline import OFFLINE_FILE, pending, record, replay
from frugalrl.tracking.provenance import lineage_tags
from frugalrl.tracking.store import check_tracking, health_request
from frugalrl.tracking.twins import drop_twins

FLUSH_METRICS = 2000  # queued metric values that trigger a send
FLUSH_SECONDS = 10.0  # or seconds since the last send: MLflow's UI lags by at most this
START_TAG = "frugalrl.start_id"  # unique to one start of a run (see _start)
START_PATIENCE_S = 120.0  # a store that answered the health check and then went away (a server restarting
# under load takes tens of seconds) gets this long to take the run's start; nothing has been trained yet


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
        buffer_dir: Path | None = None,
    ):
        import mlflow

        self.mlflow = mlflow
        self.config = config
        # MLflow's own defaults retry a dead server for minutes; the config bounds it (env vars still win)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(max(1, config.tracking.timeout_s))))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(config.tracking.retries))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        self.uri = check_tracking(timeout_s=config.tracking.timeout_s)
        mlflow.set_tracking_uri(self.uri)
        self._resume_id = run_id
        self._run_name = run_name or config.name
        self._pipeline_run_id = pipeline_run_id
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self._pending: list[Any] = []  # metrics not sent yet (mlflow.entities.Metric)
        self._sent_at = time.monotonic()
        self._tags = dict(tags or {})
        self._logged_through: dict[str, int] = {}  # a resumed run: per key, the last step MLflow holds
        self._last_step: dict[str, int] = {}  # per key, the step it was last logged at (by this process)
        self.buffer_dir = Path(buffer_dir) if buffer_dir is not None else None
        self.offline = False  # the store stopped answering: what cannot be sent waits in buffer_dir
        self._offline_checked = 0.0
        self._held_unknown = False  # metrics kept while offline may repeat steps the store holds (see __enter__)

    def __enter__(self) -> RunTracker:
        mlflow = self.mlflow
        if self._resume_id is not None and not self._run_exists(self._resume_id):  # resumed against another store
            print(f"MLflow run {self._resume_id} is not in {shown(self.uri)}: the resumed run gets a new one naming it")
            self._tags["frugalrl.resumed_from_run_id"] = self._resume_id
            self._resume_id = None
        run = self._start()
        self.run_id = run.info.run_id
        self.experiment_id = run.info.experiment_id
        try:  # the store may go away right after the start: with a run directory these wait there, like metrics
            if self._resume_id is None:
                self.log_params({key: str(value)[:500] for key, value in flatten(self.config.to_dict()).items()})
            self.set_tags({**lineage_tags(self.config, self._pipeline_run_id), **self._tags})
        except TrackingError:  # no run directory to keep them in: the run ends FAILED, not RUNNING forever
            self._quietly(mlflow.end_run, "FAILED")
            raise
        if self._resume_id is not None and not self.offline:
            try:
                self._read_logged_through()
            except Exception as error:
                self._went_away("reading the resumed run's metrics", error)
        # resumed while the store was away: which redone steps it holds is unknown here, so the replay asks it
        self._held_unknown = self._resume_id is not None and self.offline
        return self

    def _read_logged_through(self) -> None:
        """Per metric key, the last step a resumed run's MLflow run holds (what it logged before it stopped)."""
        client = self.mlflow.tracking.MlflowClient()
        for key in client.get_run(self.run_id).data.metrics:
            self._logged_through[key] = max(m.step for m in client.get_metric_history(self.run_id, key))

    def _start(self) -> Any:
        """The run, started (or resumed). A failure while the store does not answer is waited out for up to
        ``START_PATIENCE_S``; one while it answers is tried once more (the store may have just come back),
        then refused in one line: a wrong experiment or a refused request does not get better by waiting.
        A create whose run was made but whose answer was lost leaves no second run (``tracking.twins``)."""
        mlflow = self.mlflow
        deadline = time.monotonic() + START_PATIENCE_S
        failed_while_answering = 0
        start_id = uuid.uuid4().hex  # this start's runs: a retried create can make more than one (tracking.twins)
        while True:
            try:
                mlflow.set_experiment(self.config.tracking.experiment)
                if self._resume_id is not None:
                    return mlflow.start_run(run_id=self._resume_id)
                run = mlflow.start_run(run_name=self._run_name, tags={START_TAG: start_id})
                with contextlib.suppress(Exception):  # the store away again: an empty twin stays, nothing is lost
                    drop_twins(mlflow.tracking.MlflowClient(), run.info.experiment_id, START_TAG, start_id,
                               keep=run.info.run_id)  # fmt: skip
                return run
            except Exception as exc:
                reason = shown(str(exc).splitlines()[0])[:160] if str(exc) else type(exc).__name__
            failed_while_answering += self._answers()
            if failed_while_answering >= 2 or time.monotonic() >= deadline:
                raise TrackingError(f"MLflow store {shown(self.uri)} cannot start a run ({reason})") from None
            time.sleep(min(self.config.tracking.reconnect_s, 5.0))

    def _answers(self) -> bool:
        """Whether the store answers its health check (``check_tracking``) now."""
        try:
            check_tracking(self.uri, timeout_s=self.config.tracking.timeout_s)
        except TrackingError:
            return False
        return True

    def run_url(self) -> str:
        """Where to look at this run: its page on a tracking server, else the store's URI (credentials as ``***``)."""
        uri = shown(self.uri)
        if uri.startswith(("http://", "https://")):
            return f"{uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        return uri

    def _run_exists(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            self.mlflow.tracking.MlflowClient().get_run(run_id)
        except MlflowException as error:
            if error.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise TrackingError(
                f"MLflow store {shown(self.uri)} cannot read run {run_id} ({shown(error.message)[:160]})"
            ) from None
        return True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        status = "FINISHED" if exc_type is None else "FAILED"
        if self.offline:  # one more try, whenever it last asked: the run's end is worth sending now
            self._back(now=True)
        try:
            self.flush()
        finally:
            if self.offline:
                self._keep({"kind": "end", "status": status})
                self._quietly(self.mlflow.end_run, status)  # ends the local run state; the store may not hear it
            else:
                try:
                    self.mlflow.end_run(status=status)
                except Exception as error:
                    self._went_away("ending the run", error)
                    self._keep({"kind": "end", "status": status})

    def _went_away(self, doing: str, error: BaseException) -> None:
        """The store failed: without a run directory that is an error; with one, the run goes on offline."""
        reason = shown(str(error).splitlines()[0])[:160] if str(error) else type(error).__name__
        store = shown(self.uri)
        if self.buffer_dir is None:
            raise TrackingError(f"MLflow store {store} failed while {doing} ({reason}); check the store") from None
        if not self.offline:
            print(
                f"warning: MLflow store {store} stopped answering while {doing} ({reason}); training goes on, "
                f"tracking waits in {self.buffer_dir / OFFLINE_FILE}: send it with `frugalrl sync {self.buffer_dir}`",
                file=sys.stderr,
            )
        self.offline = True
        self._offline_checked = time.monotonic()

    def _keep(self, entry: dict[str, Any]) -> None:
        assert self.buffer_dir is not None
        record(self.buffer_dir, entry)

    @staticmethod
    def _quietly(call: Any, *args: Any) -> None:
        with contextlib.suppress(Exception):  # the store is already known to be away
            call(*args)

    def _back(self, now: bool = False) -> bool:
        """While offline, at most every ``tracking.reconnect_s`` (``now``: at once): does the store answer
        again? Then send what waited."""
        if not now and time.monotonic() - self._offline_checked < self.config.tracking.reconnect_s:
            return False
        self._offline_checked = time.monotonic()
        try:
            if self.uri.startswith(("http://", "https://")):
                # as patient as any request: a loaded server answers its health check slowly too
                urllib.request.urlopen(health_request(self.uri), timeout=self.config.tracking.timeout_s).close()
            assert self.buffer_dir is not None and self.run_id is not None
            replay(self.run_id, pending(self.buffer_dir), self.buffer_dir)  # what it sent is not sent again
            if self._held_unknown:  # from now on metrics go straight out: the steps it holds are asked once
                self._read_logged_through()
                self._held_unknown = False
        except Exception:
            return False
        self.offline = False
        print(f"MLflow store {shown(self.uri)} answers again; what waited was sent", file=sys.stderr)
        return True

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Queue one step's metrics; they go to MLflow in batches (``flush``).

        One call per update cost more than the update for small learners: SAC on InvertedPendulum
        updates every env step, and 15,000 single writes to a sqlite store tripled its time.
        """
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        queued = [
            Metric(key, float(value), now, step)
            for key, value in metrics.items()
            if isinstance(value, int | float) and np.isfinite(value)
            and step > self._logged_through.get(key, -1)  # a resume redoes steps MLflow holds: not sent twice
            and self._last_step.get(key) != step  # the summary repeats the last update's keys: once per step
        ]  # fmt: skip
        self._last_step.update((m.key, step) for m in queued)
        self._pending += queued
        if len(self._pending) >= FLUSH_METRICS or time.monotonic() - self._sent_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Send the queued metrics (at most 1,000 per request, MLflow's batch limit); offline, keep them."""
        self._sent_at = time.monotonic()
        if not self._pending or self.run_id is None:
            return
        pending, self._pending = self._pending, []
        if self.offline and not self._back():
            self._keep_metrics(pending)
            return
        client = self.mlflow.tracking.MlflowClient()
        for start in range(0, len(pending), 1000):
            try:
                client.log_batch(self.run_id, metrics=pending[start : start + 1000])
            except Exception as error:
                self._went_away("logging metrics", error)
                self._keep_metrics(pending[start:])
                return

    def _keep_metrics(self, metrics: list[Any]) -> None:
        entry: dict[str, Any] = {"kind": "metrics", "metrics": [[m.key, m.value, m.timestamp, m.step] for m in metrics]}
        if self._held_unknown:
            entry["skip_held"] = True  # the replay drops (key, step) pairs the run already has
        self._keep(entry)

    def _send_or_keep(self, send: Any, doing: str, entry: dict[str, Any]) -> None:
        """``send()`` while the store answers; offline (or when it fails now), ``entry`` waits in the run directory."""
        if not self.offline:
            try:
                send()
                return
            except Exception as error:
                self._went_away(doing, error)
        self._keep(entry)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        entry = {"kind": "artifact", "path": str(Path(path).resolve()), "artifact_path": artifact_path}
        self._send_or_keep(lambda: self.mlflow.log_artifact(str(path), artifact_path=artifact_path),
                           f"logging {Path(path).name}", entry)  # fmt: skip

    def log_params(self, params: dict[str, str]) -> None:
        self._send_or_keep(lambda: self.mlflow.log_params(params), "logging parameters",
                           {"kind": "params", "params": {k: str(v) for k, v in params.items()}})  # fmt: skip

    def set_tags(self, tags: dict[str, str]) -> None:
        self._send_or_keep(lambda: self.mlflow.set_tags(tags), "setting tags",
                           {"kind": "tags", "tags": {k: str(v) for k, v in tags.items()}})  # fmt: skip

    def log_policy(self, policy: Any, input_example: np.ndarray, policy_file: Path) -> str | None:
        """Log the exported policy (saved as ``policy_file``) as an MLflow model; its model URI (None while the
        store is away: ``frugalrl sync`` logs it from policy.pt later)."""
        if not self.offline:
            try:
                uri = self.log_model(policy, input_example, policy_file)
                self.mlflow.set_tags({"frugalrl.version": __version__, "frugalrl.policy_uri": uri})
                return uri
            except Exception as error:
                self._went_away("logging the policy model", error)
        self._keep({"kind": "policy"})
        return None

    @staticmethod
    def log_model(policy: Any, input_example: np.ndarray, policy_file: Path) -> str:
        """The policy as an MLflow model of the active run; its URI (``models.log_policy_model``)."""
        return log_policy_model(policy, input_example, policy_file)
