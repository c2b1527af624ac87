"""Runs made twice by one create. MLflow's client retries a POST whose answer was lost or late (a server
that dies, or answers after its timeout, once it has made the run), and frugalrl retries a failed start
itself: each try makes a run. So a create carries a tag unique to it, and afterwards the run the create
returned is kept and any other run with that tag (empty: nothing was ever logged to it) goes to MLflow's
trash, where it can be restored (``mlflow gc`` deletes it for good)."""

from __future__ import annotations

from typing import Any


def drop_twins(client: Any, experiment_id: str, tag: str, value: str, keep: str) -> None:
    """Delete (to the trash) the runs of ``experiment_id`` tagged ``tag`` = ``value``, all but ``keep``."""
    for run in client.search_runs([experiment_id], f"tags.`{tag}` = '{value}'"):
        if run.info.run_id != keep:
            client.delete_run(run.info.run_id)
