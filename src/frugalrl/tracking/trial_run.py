"""One tuning trial as an MLflow run nested under its worker's run: the entry it is kept as while the
server is away (``trial_entry``, JSON: it may wait in the worker's offline buffer) and sending it
(``log_trial``). Each trial's run carries a ``frugalrl.trial`` tag (``study/number``) and is looked up
by it first, so sending an entry again never makes a second run."""

from __future__ import annotations

import time
from typing import Any

from frugalrl.tracking.twins import drop_twins

TRIAL_TAG = "frugalrl.trial"


def trial_entry(study_name: str, trial: Any, metric: str) -> dict[str, Any]:
    """What one trial's MLflow run holds, as an offline-buffer entry (JSON: it may wait in a file)."""
    return {"kind": "trial", "key": f"{study_name}/{trial.number}", "number": trial.number,
            "state": trial.state.name, "params": {name: str(value) for name, value in trial.params.items()},
            "metric": metric, "value": None if trial.value is None else float(trial.value)}  # fmt: skip


def log_trial(client: Any, experiment_id: str, parent_run_id: str, entry: dict[str, Any]) -> None:
    """Log one ``trial_entry`` as a run nested under ``parent_run_id``; sending it again changes nothing."""
    from mlflow.entities import Metric, Param

    found = client.search_runs([experiment_id], f"tags.`{TRIAL_TAG}` = '{entry['key']}'", max_results=1)
    if found:
        run = found[0]
    else:
        run = client.create_run(
            experiment_id, run_name=f"trial-{entry['number']}",
            tags={"mlflow.parentRunId": parent_run_id, TRIAL_TAG: entry["key"], "frugalrl.trial_state": entry["state"]},
        )  # fmt: skip
        drop_twins(client, experiment_id, TRIAL_TAG, entry["key"], keep=run.info.run_id)  # a create retried
    params = [Param(name, value) for name, value in entry["params"].items()]
    metrics = []
    if entry["value"] is not None and entry["metric"] not in run.data.metrics:  # a retry does not log it twice
        metrics = [Metric(entry["metric"], entry["value"], int(time.time() * 1000), 0)]
    client.log_batch(run.info.run_id, metrics=metrics, params=params)
    client.set_terminated(run.info.run_id, "FINISHED")
