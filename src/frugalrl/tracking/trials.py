"""One MLflow run per finished tuning trial, nested under its worker's run, exactly once.

Optuna's ``MLflowCallback`` (deprecated since optuna 4.9) raises out of ``study.optimize`` when
the server is away at the moment a trial ends, which stops the worker. Here a trial that could
not be logged waits and is tried again after the next trial and when the worker ends; what still
waits then goes to the worker's offline buffer (``frugalrl sync OUT`` sends it, like a training's).
A retry never makes a second run (``frugalrl.tracking.trial_run``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from frugalrl.tracking.offline import OFFLINE_FILE, record
from frugalrl.tracking.trial_run import log_trial, trial_entry

FINISH_PATIENCE_S = 120.0  # a worker's last retries: a server restarting under load takes tens of seconds


class TrialLogger:
    """An Optuna callback: ``logger(study, frozen_trial)`` after each trial; ``finish()`` at the end.

    ``buffer_dir`` is the worker's output directory: a trial still not logged when the worker ends waits
    there (``None``: it is only named in a warning)."""

    def __init__(self, parent_run_id: str, experiment_id: str, metric: str, retry_s: float,
                 buffer_dir: Path | None = None) -> None:  # fmt: skip
        self.parent_run_id, self.experiment_id, self.metric, self.retry_s = (
            parent_run_id, experiment_id, metric, retry_s,
        )  # fmt: skip
        self.buffer_dir = buffer_dir
        self.waiting: list[dict[str, Any]] = []  # trial entries not logged yet

    def __call__(self, study: Any, trial: Any) -> None:
        if trial.user_attrs.get("surplus"):
            return  # drawn beyond the study's trials and never run (frugalrl.tuning_rounds)
        self.waiting.append(trial_entry(study.study_name, trial, self.metric))
        self.send()

    def send(self) -> None:
        """Log what waits; what fails (the server away, or too slow to answer) keeps waiting."""
        from mlflow import MlflowClient

        still = []
        for entry in self.waiting:
            try:
                log_trial(MlflowClient(), self.experiment_id, self.parent_run_id, entry)
            except Exception:  # MLflow's client raises several kinds for an unreachable server
                still.append(entry)
        self.waiting = still

    def finish(self) -> None:
        """Try what waits again, ``retry_s`` apart, for up to ``FINISH_PATIENCE_S``; what still waits goes to
        the offline buffer, said in one line."""
        deadline = time.monotonic() + FINISH_PATIENCE_S
        while self.waiting and time.monotonic() < deadline:
            time.sleep(self.retry_s)
            self.send()
        if not self.waiting:
            return
        numbers = ", ".join(str(entry["number"]) for entry in self.waiting)
        if self.buffer_dir is None:
            print(f"warning: MLflow did not answer; trials {numbers} are in the Optuna study but have no MLflow run",
                  file=sys.stderr)  # fmt: skip
            return
        for entry in self.waiting:
            record(self.buffer_dir, entry)
        print(f"warning: MLflow did not answer; the runs of trials {numbers} wait in "
              f"{self.buffer_dir / OFFLINE_FILE}: send them with `frugalrl sync {self.buffer_dir}`",
              file=sys.stderr)  # fmt: skip
        self.waiting = []
