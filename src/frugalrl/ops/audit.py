"""``frugalrl audit RUN_ID``: re-run a tracked run on its recorded code and config, compare the figures.

The MLflow run holds what is needed: its ``frugalrl.git_commit`` tag, and its ``run/config.yaml``,
``run/summary.json`` and ``run/metrics.jsonl`` artifacts. The audit checks that commit out into a
temporary git worktree of this repository, trains the recorded config there (tracking off, in a
subprocess importing *that* code), and compares:

- every per-update metric line (``metrics.jsonl``, timing columns excluded), and
- the summary's outcome figures (evaluation returns, env steps, FLOPs).

On CPU a fixed seed is bit-identical, so the audit demands exact equality; for a run recorded on
CUDA it allows a relative difference of ``gpu_tolerance`` (cuDNN kernels are not deterministic).
A run recorded from a checkout with uncommitted changes cannot be audited (its code is not in any
commit), and the audit says so.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from frugalrl.errors import FrugalError, TrackingError
from frugalrl.rundir import check_new_run_dir
from frugalrl.tracking.artifacts import resolve_artifact
from frugalrl.tracking.provenance import IMAGE_DIGEST_ENV
from frugalrl.tracking.registry import registry_client

TIMING_KEYS = {"sps", "wall_s", "eval_s", "train_s", "env_s", "act_s", "learn_s", "peak_rss_mb", "cpu_s", "eval_cpu_s"}
OUTCOME_KEYS = ("eval_returns", "eval_mean", "eval_std", "eval_iqm", "real_env_steps", "virtual_env_steps",
                "train_flops", "backward_samples", "forward_samples")  # fmt: skip


class AuditError(FrugalError):
    """The run cannot be audited (missing tags or artifacts, a commit not in this repository)."""


def _equal(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
        return a == b
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b if rel == 0 else math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def compare_metrics(recorded: list[dict], rerun: list[dict], rel: float) -> list[str]:
    """Differences between two metrics.jsonl histories (timing columns ignored); empty when they agree."""
    problems = []
    if len(recorded) != len(rerun):
        problems.append(f"metrics.jsonl has {len(rerun)} lines, the recorded run {len(recorded)}")
    for i, (old, new) in enumerate(zip(recorded, rerun, strict=False)):
        for key in sorted((set(old) | set(new)) - TIMING_KEYS):
            if not _equal(old.get(key), new.get(key), rel):
                problems.append(f"update line {i + 1}: {key} recorded {old.get(key)!r}, re-run {new.get(key)!r}")
                if len(problems) >= 10:
                    return problems
    return problems


def compare_summaries(recorded: dict, rerun: dict, rel: float) -> list[str]:
    return [
        f"summary {key}: recorded {recorded.get(key)!r}, re-run {rerun.get(key)!r}"
        for key in OUTCOME_KEYS
        if key in recorded and not _equal(recorded.get(key), rerun.get(key), rel)
    ]


def compare_image(recorded: str, current: str | None) -> str | None:
    """A line when the run's image digest is not the re-run's, else None."""
    current = current or "unknown"
    if recorded == current:
        return None
    return f"image digest differs: the run used {recorded}, this re-run {current}"


def _download(run_id: str, out: Path) -> Path:
    return resolve_artifact(
        f"runs:/{run_id}/run", None, "run", "copy the id from the MLflow UI", dest=out,
        fetch_error=lambda reason: f"run {run_id}: cannot fetch its run/ artifacts ({reason[:120]})",
    )  # fmt: skip


def _worktree(repo: Path, commit: str, where: Path) -> Path:
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo, capture_output=True)
    if known.returncode != 0:
        raise AuditError(f"commit {commit[:12]} is not in {repo}; fetch it (git fetch --all) and audit again")
    subprocess.run(["git", "worktree", "add", "--detach", str(where), commit], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip
    return where


def audit(
    run_id: str,
    repo: Path | None = None,
    gpu_tolerance: float = 1e-3,
    keep: Path | None = None,
    allow_image_change: bool = False,
) -> dict:
    """Re-run ``run_id`` on its recorded commit and config; ``reproduced`` says whether the figures agree.

    The run's image digest must be the re-run's too (``FRUGALRL_IMAGE_DIGEST`` here; ``unknown``
    outside the step image): other packages or system libraries are another experiment, unless
    ``allow_image_change`` (then the difference is listed under ``notes``).
    """
    if keep:  # the re-run's files never land over another run's
        check_new_run_dir(Path(keep), option="--keep", resumable=False)
    client = registry_client()
    try:
        run = client.get_run(run_id)
    except Exception:
        raise TrackingError(f"no MLflow run {run_id}; copy the id from the MLflow UI or summary.json") from None
    tags = run.data.tags
    commit = tags.get("frugalrl.git_commit", "unknown")
    if commit == "unknown":
        raise AuditError(f"run {run_id} recorded no git commit (trained outside a git checkout): nothing to re-run")
    if tags.get("frugalrl.git_dirty") == "true":
        raise AuditError(f"run {run_id} was trained from a checkout with uncommitted changes: its code is in no commit")
    repo = (repo or Path(__file__).resolve().parents[3]).resolve()
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="frugalrl-audit-"))
    recorded_dir = _download(run_id, work / "recorded")
    tree = _worktree(repo, commit, work / "code")
    try:
        rerun = work / "rerun"
        cmd = [sys.executable, "-m", "frugalrl.cli", "train", str(recorded_dir / "config.yaml"), "--out", str(rerun),
               "--set", "tracking.enabled=false"]  # fmt: skip
        # that commit's frugalrl first; the rest of PYTHONPATH stays (where the user's env module may be)
        path = os.pathsep.join([str(tree / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
        env = {**os.environ, "PYTHONPATH": path, "FRUGALRL_GIT_COMMIT": commit}
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise AuditError(f"re-running run {run_id} at {commit[:12]} failed: {last}")
        recorded_summary = json.loads((recorded_dir / "summary.json").read_text())
        device = recorded_summary.get("device", "cpu")
        rel = 0.0 if device == "cpu" else gpu_tolerance
        read = lambda p: [json.loads(line) for line in p.read_text().splitlines() if line.strip()]  # noqa: E731
        problems = compare_metrics(read(recorded_dir / "metrics.jsonl"), read(rerun / "metrics.jsonl"), rel)
        problems += compare_summaries(recorded_summary, json.loads((rerun / "summary.json").read_text()), rel)
        notes = []
        image_line = compare_image(tags.get("frugalrl.image_digest", "unknown"), os.environ.get(IMAGE_DIGEST_ENV))
        if image_line and allow_image_change:
            notes.append(f"{image_line} (allowed: --allow-image-change)")
        elif image_line:
            problems.append(f"{image_line}; re-run in the run's image, or pass --allow-image-change")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, capture_output=True)
    result = {
        "run_id": run_id,
        "commit": commit,
        "config_hash": tags.get("frugalrl.config_hash"),
        "device": device,
        "criterion": "bit-identical" if rel == 0 else f"relative difference <= {rel}",
        "reproduced": not problems,
        "differences": problems,
        "notes": notes,
        "rerun_dir": str(rerun),
    }
    (work / "audit.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
