"""The run directory: creating it, and closing it with the exported policy and summary.json.

Every trainer (``train``, the PEFT comparison, the tuner) writes run directories through these
helpers, so the layout and the run contract (docs/architecture.md, "The run contract") live in one place.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl import __version__
from frugalrl.algos.base import Learner
from frugalrl.checkpoint import CHECKPOINT_FILE, atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.wrappers import NormalizeObservation, find_wrapper
from frugalrl.errors import FrugalError
from frugalrl.evaluation import evaluate_policy, scoring_protocol
from frugalrl.meta.plot import plot_training_trace
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.policy_store import BEST_POLICY_FILE, load_policy_file, registered_policy_file, save_policy
from frugalrl.runlock import LOCK_FILE, RunDirBusy
from frugalrl.tracking import git_commit

TRACE_PLOT = "control_trace.png"  # off-policy runs: hyperparameters, exploration and replay over time
# The run contract (docs/architecture.md): keys every summary.json carries, whatever else it adds.
SUMMARY_KEYS = (
    "env_id", "algo", "seed", "techniques", "real_env_steps", "virtual_env_steps", "forward_samples",
    "backward_samples", "train_flops", "wall_s", "env_s", "learn_s", "peak_rss_mb", "eval_mean",
    "eval_std", "eval_iqm", "eval_episodes", "mlflow_run_id",
)  # fmt: skip


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise FrugalError("device = cuda but no CUDA device is visible; set device: cpu or auto")
    return torch.device(name)


def check_new_run_dir(out: Path, option: str = "--out", resumable: bool = True) -> None:
    """Refuse an ``--out`` a new run would clobber, before anything is written (one-line ``FrugalError``).

    A new run needs a new or empty directory it can write. An empty path is the current
    directory (an unset shell variable, usually), which holds the user's files: refused too.
    A lock file no live process holds (``runlock``; the caller checked) does not count.
    ``option`` names the flag in the message (``--keep`` for the audit); ``resumable``: whether the
    command can continue a run it finds there (``train`` can; pretraining and the audit cannot).
    """
    out = Path(out)
    name = "the current directory" if str(out) in ("", ".") else str(out)
    if out.exists() and not out.is_dir():
        raise FrugalError(f"{option} {name} is a file, not a directory; give a new or empty directory")
    if out.is_dir():
        entries = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
        if entries:
            hint = (
                f"continue that run with --resume {name}"
                if resumable and (out / CHECKPOINT_FILE).exists()
                else f"nothing there is overwritten; move it away or pick a new {option}"
            )
            raise FrugalError(
                f"{option} {name} is not empty ({len(entries)} entries, e.g. {entries[0]}); "
                f"this command needs a new or empty directory: {hint}"
            )
    parent = out.resolve()
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FrugalError(f"{option} {name}: {parent} is not writable; pick a directory you can write to")


@contextlib.contextmanager
def preflight(out: Path) -> Iterator[None]:
    """Set-up of a new run: when it fails, the run directory it created is removed again."""
    created = not Path(out).exists()
    try:
        yield
    except RunDirBusy:  # another live process made it meanwhile: it is theirs, never removed
        raise
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise


def metrics_log_lines(out: Path) -> list[str]:
    """``metrics.jsonl``'s lines (none when it is missing); a file that is not text is a one-line error,
    raised before a resume writes anything, so the damaged file stays as it was for the user to see."""
    path = Path(out) / "metrics.jsonl"
    if not path.is_file():
        return []
    data = path.read_bytes()
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FrugalError(
            f"{path} is corrupt (not text at line {line}); move it aside to resume without the earlier "
            "metrics lines, or restore it, then run --resume again"
        ) from None


def truncate_metrics_log(out: Path, update: int) -> int:
    """Drop ``metrics.jsonl`` lines after ``update`` (a resume redoes them); how many were dropped."""
    path = Path(out) / "metrics.jsonl"
    lines = metrics_log_lines(out)
    if not lines:
        return 0
    kept = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # a line cut by the kill: redone as well
            continue
        if not isinstance(record, dict) or record.get("update", 0) <= update:
            kept.append(line if line.endswith("\n") else line + "\n")
    if len(kept) != len(lines):
        atomic_write_bytes(path, "".join(kept).encode())
    return len(lines) - len(kept)


def start_run_dir(config: ExperimentConfig, out: Path) -> torch.device:
    """Create the run directory with the resolved config.yaml, set threads and seeds; the device to use."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "config.yaml", config.to_yaml().encode())
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    return resolve_device(config.device)


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def export_policy(agent: Learner, config: ExperimentConfig) -> ExportedPolicy:
    """A self-contained copy of the agent's policy, with the observation statistics baked in."""
    normalizer = find_wrapper(agent.env, NormalizeObservation)
    mean = var = None
    if normalizer is not None:
        mean = torch.as_tensor(normalizer.rms.mean, dtype=torch.float64)
        var = torch.as_tensor(normalizer.rms.var, dtype=torch.float64)
    return ExportedPolicy(
        copy.deepcopy(agent.policy).cpu().eval(),
        spec={"env": config.env.model_dump(mode="json"), "policy": config.policy.model_dump(mode="json")},
        obs_mean=mean,
        obs_var=var,
        clip_obs=config.env.clip_obs,
    )


def finish_run(
    config: ExperimentConfig,
    out: Path,
    agent: Learner,
    meter: CostMeter,
    tracker: Any,
    device: torch.device,
    *,
    techniques: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Export, evaluate, write summary.json, log everything to MLflow.

    The learner supplies its policy (``exported_policy()``, else the standard export), its
    ``techniques`` (unless given), its own ``summary_extra()`` keys and the MLflow input example;
    ``extra`` adds the caller's keys (multi-worker statistics).
    """
    policy = agent.exported_policy() or export_policy(agent, config)
    extra = {**agent.summary_extra(), **(extra or {})}  # the learner's own keys: replay statistics, step kind
    if config.algo != "ppo":  # off-policy learners: the meta-controller's trace
        plot_training_trace(out / "metrics.jsonl", out / TRACE_PLOT)
    if techniques is None:
        techniques = list(agent.techniques)
    save_policy(out / "policy.pt", policy, config)
    # CPU seconds of this process (every thread): on a shared machine they, unlike wall-clock, do not
    # stretch with what else runs; ``cpu_s`` is everything before the evaluation (and without those during training).
    cpu_s = time.process_time()
    started = time.perf_counter()
    result = evaluate_policy(policy, config.env, config.eval.episodes, config.eval.seed, config.eval.deterministic)
    eval_s = time.perf_counter() - started

    summary: dict[str, Any] = {
        "env_id": config.env.id,
        "algo": config.algo,
        "seed": config.seed,
        "techniques": techniques,
        **meter.summary(),
        **result.metrics(),
        "eval_s": round(eval_s, 3),
        "cpu_s": round(cpu_s - meter.eval_cpu_s, 3),
        "eval_cpu_s": round(time.process_time() - cpu_s, 3),
        "eval_returns": result.returns,
        **({"eval_protocol": protocol} if (protocol := scoring_protocol(config.env)) else {}),
        "updates": agent.update,
        "flops_per_sample": meter.flops_per_sample,
        "config_hash": config.hash(),
        "git_commit": git_commit(),
        "frugalrl_version": __version__,
        "device": str(device),
        "mlflow_run_id": tracker.run_id if tracker else None,
        "model_uri": None,
        **(extra or {}),
    }
    missing = set(SUMMARY_KEYS) - set(summary)
    assert not missing, f"summary.json lacks run-contract keys {sorted(missing)}"
    if tracker:
        if config.tracking.log_model:  # the policy the run registers (eval.policy: best_policy.pt with best)
            registered = registered_policy_file(out)
            logged = load_policy_file(registered)[0]  # as saved, knowing its spaces (the served model's bounds)
            summary["model_uri"] = tracker.log_policy(logged, agent.model_example(), registered)
        numeric = {k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        # at the last update's step: a key that update logged (cpu_s, wall_s) keeps its value there, once;
        # summary.json, logged below, holds the run's totals
        tracker.log_metrics(numeric, step=agent.global_step)
        write_json(out / "summary.json", summary)
        for name in ("summary.json", "config.yaml", "metrics.jsonl", "policy.pt", BEST_POLICY_FILE, CHECKPOINT_FILE,
                     TRACE_PLOT):  # fmt: skip
            if (out / name).exists():
                tracker.log_artifact(out / name, artifact_path="run")
    else:
        write_json(out / "summary.json", summary)
    return summary
