"""Tracking that survives its server: what could not be sent waits in the run directory.

When the MLflow store stops answering mid-run, ``RunTracker`` keeps training going and appends
what it could not send (parameters, metrics, artifacts, tags, the policy model, the run's end; a tuning
worker's trials, by ``frugalrl.tracking.trials``) to
``RUN_DIR/mlflow_offline.jsonl``, one JSON entry per line. ``sync_run_dir`` (``frugalrl sync
RUN_DIR``), or the run itself when the store comes back during it, replays the entries in order;
each one sent moves to ``mlflow_offline.synced.jsonl`` (kept: it says what was late), so a replay
cut short sends nothing twice. A run killed while MLflow still
shows it RUNNING is marked KILLED by the same command.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from frugalrl.checkpoint import atomic_write_bytes, load_checkpoint
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import TrackingError
from frugalrl.files import read_json_lines, read_json_object
from frugalrl.policy_store import load_policy_file, registered_policy_file
from frugalrl.runlock import check_not_busy
from frugalrl.tracking.models import log_policy_model
from frugalrl.tracking.store import check_tracking
from frugalrl.tracking.trial_run import log_trial

OFFLINE_FILE = "mlflow_offline.jsonl"
SYNCED_FILE = "mlflow_offline.synced.jsonl"


def record(run_dir: Path, entry: dict[str, Any]) -> None:
    """Append one entry (flushed at once: a kill after this line keeps it)."""
    with (Path(run_dir) / OFFLINE_FILE).open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()


def pending(run_dir: Path) -> list[dict[str, Any]]:
    """The entries waiting in ``run_dir`` (a line cut by a kill is dropped)."""
    path = Path(run_dir) / OFFLINE_FILE
    if not path.is_file():
        return []
    return read_json_lines(path, "the offline buffer", "move it aside (what it holds is then not sent) or restore it")


def _run_id(run_dir: Path) -> str | None:
    for written in ("summary.json", "best.json"):  # a training's, a tuning worker's
        if (run_dir / written).is_file():
            recorded = read_json_object(run_dir / written, "the run's", "restore it from the run's MLflow artifacts")
            return recorded.get("mlflow_run_id")
    checkpoint = run_dir / "checkpoint.pt"
    if checkpoint.is_file():
        return load_checkpoint(checkpoint).get("mlflow_run_id")
    return None


KINDS = ("params", "metrics", "artifact", "tags", "policy", "end", "trial")  # what a buffer entry can be


def replay(run_id: str, entries: list[dict[str, Any]], run_dir: Path) -> dict[str, int]:
    """Send ``entries`` to the MLflow run ``run_id``, in order; counts of what was sent, by kind.

    Each entry (each batch of at most 1,000 metrics) moves from the offline file to the synced one as
    soon as it is sent, so a replay cut short by the store going away again resumes after the last
    thing sent and sends nothing twice. The offline file is gone once everything is sent."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient()
    sent = {kind: 0 for kind in ("params", "metrics", "artifacts", "tags", "policy", "end", "trials",
                                 "missing files", "left waiting")}  # fmt: skip
    queue, kept = list(entries), []  # kept: entries this frugalrl cannot send; they stay in the offline file
    held: dict[str, set[int]] = {}  # per key, the steps the run holds (asked once, for "skip_held" entries)
    while queue:
        entry, kind = queue[0], queue[0].get("kind")
        if kind == "metrics":
            batch, rest = entry["metrics"][:1000], entry["metrics"][1000:]
            if entry.get("skip_held"):  # kept by a run resumed while the store was away: it redid some steps
                for key in {m[0] for m in batch} - held.keys():
                    held[key] = {m.step for m in client.get_metric_history(run_id, key)}
                batch = [m for m in batch if m[3] not in held[m[0]]]
            client.log_batch(run_id, metrics=[Metric(key, value, stamp, step) for key, value, stamp, step in batch])
            sent["metrics"] += len(batch)
            done, queue = {**entry, "metrics": batch}, ([{**entry, "metrics": rest}] if rest else []) + queue[1:]
            _moved(run_dir, done, kept + queue)
            continue
        if kind not in KINDS:  # written by a newer frugalrl, or damaged: kept for one that knows it
            kept.append(entry)
            sent["left waiting"] += 1
            queue = queue[1:]
            continue
        if kind == "artifact":
            if not Path(entry["path"]).is_file():  # gone since: said, and the rest is sent
                print(f"warning: {entry['path']} waited to be logged and is gone; it is not in the MLflow run")
                entry = {**entry, "missing": True}
                sent["missing files"] += 1
            else:
                client.log_artifact(run_id, entry["path"], artifact_path=entry.get("artifact_path"))
                sent["artifacts"] += 1
        elif kind == "params":  # logging a parameter again with the same value is allowed: a cut replay may
            client.log_batch(run_id, params=[Param(key, value) for key, value in entry["params"].items()])
            sent["params"] += len(entry["params"])
        elif kind == "tags":
            for key, value in entry["tags"].items():
                client.set_tag(run_id, key, value)
            sent["tags"] += len(entry["tags"])
        elif kind == "policy":
            _log_policy_late(run_id, run_dir)
            sent["policy"] += 1
        elif kind == "end":
            client.set_terminated(run_id, status=entry["status"])
            sent["end"] += 1
        elif kind == "trial":  # a tuning worker's trial, nested under the worker's run (``run_id``)
            log_trial(client, client.get_run(run_id).info.experiment_id, run_id, entry)
            sent["trials"] += 1
        queue = queue[1:]
        _moved(run_dir, entry, kept + queue)
    return sent


def _moved(run_dir: Path, sent: dict[str, Any], left: list[dict[str, Any]]) -> None:
    """``sent`` goes to the synced file (kept: it says what was late); the offline file keeps ``left``."""
    run_dir = Path(run_dir)
    with (run_dir / SYNCED_FILE).open("a") as handle:
        handle.write(json.dumps(sent) + "\n")
    if left:
        atomic_write_bytes(run_dir / OFFLINE_FILE, "".join(json.dumps(e) + "\n" for e in left).encode())
    else:
        (run_dir / OFFLINE_FILE).unlink(missing_ok=True)


def _log_policy_late(run_id: str, run_dir: Path) -> None:
    """The run's policy.pt (``best_policy.pt`` with ``eval.policy: best``) as its MLflow model, as the run would
    have logged it; summary.json gets its URI."""
    import mlflow

    registered = registered_policy_file(run_dir)
    policy, config = load_policy_file(registered)
    env = make_vec_env(config.env.model_copy(update={"num_envs": 1}), training=False)
    example, _ = env.reset(seed=config.seed)
    env.close()
    active = mlflow.active_run()  # the run itself, sending what waited when its store came back
    same = active is not None and active.info.run_id == run_id
    uri = _policy_logged_already(run_id)
    if uri is None:
        with contextlib.nullcontext() if same else mlflow.start_run(run_id=run_id):
            example = example[:1].astype("float32") if example.dtype != "uint8" else example[:1]
            uri = log_policy_model(policy, example, registered)
    summary_path = run_dir / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        summary["model_uri"] = uri
        atomic_write_bytes(summary_path, (json.dumps(summary, indent=2) + "\n").encode())


def _policy_logged_already(run_id: str) -> str | None:
    """The URI of the policy model a sync killed after sending it (before marking it sent) logged; else None.
    Every other entry is the same when sent twice (metrics keep their timestamps; tags, artifacts and the
    end overwrite), a model is not: it would be a second one."""
    from mlflow import MlflowClient, search_logged_models

    experiment = MlflowClient().get_run(run_id).info.experiment_id
    found = search_logged_models(experiment_ids=[experiment], output_format="list",
                                 filter_string=f"source_run_id = '{run_id}' AND name = 'policy'")  # fmt: skip
    ready = [m for m in found if str(getattr(m.status, "value", m.status)) == "READY"]
    return ready[0].model_uri if ready else None


def sync_run_dir(run_dir: Path, lock: bool = True) -> str:
    """Send what ``run_dir`` kept while MLflow was away; mark a killed run KILLED. One line saying what was done.

    With ``lock`` (``frugalrl sync``), a run whose process is still training (it holds the run directory's
    lock) is refused in one line, before anything is read or sent; the probe creates nothing. A resume,
    which holds the lock itself, syncs with ``lock=False``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise TrackingError(f"{run_dir} is not a run directory; pass the --out directory of a run")
    if lock:
        check_not_busy(run_dir)
    return _sync(run_dir)


def _sync(run_dir: Path) -> str:
    import mlflow

    run_id = _run_id(run_dir)
    if run_id is None:
        raise TrackingError(f"{run_dir} names no MLflow run (no summary.json or checkpoint with a run id)")
    entries = pending(run_dir)  # the run's files are read (and a damaged one refused) before MLflow is asked
    mlflow.set_tracking_uri(check_tracking())
    client = mlflow.MlflowClient()
    try:
        status = client.get_run(run_id).info.status
    except Exception as exc:
        reason = str(exc).splitlines()[0][:160]
        raise TrackingError(f"MLflow run {run_id} of {run_dir} cannot be read ({reason}); check the store") from None
    sent = replay(run_id, entries, run_dir) if entries else {}
    killed = not (run_dir / "summary.json").is_file() and not sent.get("end") and status == "RUNNING"
    if killed:  # the process died without ending its run: say so in MLflow
        client.set_terminated(run_id, status="KILLED")
    what = ", ".join(f"{n} {kind}" for kind, n in sent.items() if n) or "nothing was waiting"
    marked = "; marked KILLED (it never finished)" if killed else ""
    return f"synced {run_dir} to MLflow run {run_id}: {what}{marked}"
