"""One MLflow run per finished tuning trial, nested under its worker's run, exactly once.

Optuna's ``MLflowCallback`` (deprecated since optuna 4.9) raises out of ``study.optimize`` when
the server is away at the moment a trial ends, which stops the worker. Here a trial that could
not be logged waits and is tried again after the next trial and when the worker ends; a retry
never makes a second run, because each trial's run carries a ``frugalrl.trial`` tag
(``study/number``) and is looked up by it first.
"""

from __future__ import annotations

import sys
import time
from typing import Any

TRIAL_TAG = "frugalrl.trial"


class TrialLogger:
    """An Optuna callback: ``logger(study, frozen_trial)`` after each trial; ``finish()`` at the end."""

    def __init__(self, parent_run_id: str, experiment_id: str, metric: str, retry_s: float) -> None:
        self.parent_run_id, self.experiment_id, self.metric, self.retry_s = (
            parent_run_id, experiment_id, metric, retry_s,
        )  # fmt: skip
        self.waiting: list[tuple[str, Any]] = []  # (study name, frozen trial) not logged yet

    def __call__(self, study: Any, trial: Any) -> None:
        if trial.user_attrs.get("surplus"):
            return  # drawn beyond the study's trials and never run (frugalrl.tuning_rounds)
        self.waiting.append((study.study_name, trial))
        self.send()

    def send(self) -> None:
        """Log what waits; what fails (the server away) keeps waiting."""
        still = []
        for study_name, trial in self.waiting:
            try:
                self._log(study_name, trial)
            except Exception:  # MLflow's client raises several kinds for an unreachable server
                still.append((study_name, trial))
        self.waiting = still

    def finish(self, patience_s: float = 120.0) -> None:
        """Try what waits again, ``retry_s`` apart, for up to ``patience_s`` (a server restarting under load
        takes tens of seconds); one line naming what could not be logged."""
        deadline = time.monotonic() + patience_s
        while self.waiting and time.monotonic() < deadline:
            time.sleep(self.retry_s)
            self.send()
        if self.waiting:
            numbers = ", ".join(str(trial.number) for _, trial in self.waiting)
            print(f"warning: MLflow did not answer; trials {numbers} are in the Optuna study but have no MLflow run",
                  file=sys.stderr)  # fmt: skip

    def _log(self, study_name: str, trial: Any) -> None:
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param

        client = MlflowClient()
        key = f"{study_name}/{trial.number}"
        found = client.search_runs([self.experiment_id], f"tags.`{TRIAL_TAG}` = '{key}'", max_results=1)
        run = found[0] if found else client.create_run(
            self.experiment_id, run_name=f"trial-{trial.number}",
            tags={"mlflow.parentRunId": self.parent_run_id, TRIAL_TAG: key, "frugalrl.trial_state": trial.state.name},
        )  # fmt: skip
        params = [Param(name, str(value)) for name, value in trial.params.items()]
        metrics = []
        if trial.value is not None and self.metric not in run.data.metrics:  # a retry does not log it twice
            metrics = [Metric(self.metric, float(trial.value), int(time.time() * 1000), 0)]
        client.log_batch(run.info.run_id, metrics=metrics, params=params)
        client.set_terminated(run.info.run_id, "FINISHED")
