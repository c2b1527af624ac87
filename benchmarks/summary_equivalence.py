"""Bit-identity check for refactors: short runs of the shipped configs, their deterministic figures compared.

    python benchmarks/summary_equivalence.py --record benchmarks/results/summary_equivalence_baseline.json
    python benchmarks/summary_equivalence.py --check benchmarks/results/summary_equivalence_baseline.json

Each config runs in its own process (one torch thread, the config's seed, tracking off) with
overrides that make it take seconds. What is compared: every summary.json key except the
clock, memory and provenance ones (``TIMING_KEYS``), plus metrics.jsonl without its throughput
column (its rows and their digest). ``--check`` prints one line per config and exits 1 on any
difference, with one allowance: on a CPU other than the recording's (model, torch's kernel
capability, flags), the per-update metrics of a run may differ in float rounding (the latent
runs' conv kernels take CPU-specific paths) while its summary figures stay exact.

``summary_equivalence_before.json`` is the recording made before the run-loop refactor (digests
only, another machine); ``summary_equivalence_baseline.json`` was recorded after checking that
the code before and after that session's changes gives the same figures on that machine.
A machine whose CPU rounds the latent runs' convolutions differently enough to change their
episodes gets its own recording, ``summary_equivalence_baseline-<cpu>.json``, made with the code
of an earlier commit (named in the file) on that CPU; ``--check`` takes every recording and
compares with the one made on the CPU it runs on, else with one made on the same CPU model and
kernel capability (hosts of one machine type differ in other flags), else with the first.

A change to the cost meter's bookkeeping alone (``ACCOUNTING_KEYS``) is written into every
recording by ``--update-accounting``, which refuses any recording whose other figures differ. The
world-model diagnostics (float figures of the CPU's arithmetic) are written only into the recording
of the CPU it runs on; another CPU's recording gets its own there.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_LATENT_SMALL = [
    "total_real_steps=512", "env.num_envs=2", "policy.hidden=[16]", "ppo.num_steps=32", "ppo.batch_size=16",
    "ppo.update_epochs=1",
    "latent.collect_steps=256", "latent.collect_envs=2", "latent.pretrain_updates=3", "latent.batch_size=8",
    "latent.virtual_num_envs=4", "latent.virtual_batch_size=64", "latent.real_batch_size=16",
    "latent.world_model.hidden=[32]", "latent.world_model.epochs=1", "latent.world_model.refresh_every_updates=2",
    "latent.world_model.refresh_steps=2", "eval.episodes=1",
]  # fmt: skip
# name -> (config file, overrides): each a few seconds on one core.
RUNS: dict[str, tuple[str, list[str]]] = {
    "cartpole-ppo": ("configs/cartpole-ppo.yaml", ["ppo.total_timesteps=2048", "eval.episodes=3",
                                                   "checkpoint.every_updates=3"]),
    "cartpole-pivot": ("configs/cartpole-pivot.yaml", ["ppo.total_timesteps=2560", "eval.episodes=3",
                                                       "pivot.warmup_steps=512", "checkpoint.every_updates=3"]),
    "cartpole-dqn": ("configs/cartpole-dqn.yaml", ["dqn.total_timesteps=1536", "dqn.learning_starts=512",
                                                   "dqn.gradient_steps=16", "eval.episodes=3"]),
    "pendulum-sac": ("configs/pendulum-sac.yaml", ["sac.total_timesteps=300", "eval.episodes=2"]),
    "breakout-latent": ("configs/breakout-latent.yaml", _LATENT_SMALL),
    "breakout-latent-lora": ("configs/breakout-latent.yaml", [*_LATENT_SMALL, "latent.encoder_adapter=lora",
                                                              "latent.lora_rank=2"]),
}  # fmt: skip
# Clock, memory and provenance: they differ between any two runs.
TIMING_KEYS = {"wall_s", "env_s", "act_s", "learn_s", "eval_s", "cpu_s", "eval_cpu_s", "peak_rss_mb", "peak_gpu_mb",
               "git_commit", "mlflow_run_id", "model_uri"}  # fmt: skip
METRIC_TIMING_KEYS = {"sps"}
# The meter's bookkeeping: a change in what is counted (or how it is classed) changes these and nothing
# else. ``--update-accounting`` re-runs, checks that every other figure is unchanged, and writes the new
# bookkeeping into every recording (FLOP counts depend on shapes and sample counts, not on the CPU).
# ``diagnostics``: figures a run reports after learning, which learning never reads (the latent runs'
# world-model quality, ``wm_*``); they are written the same way, and compared like per-update metrics.
ACCOUNTING_KEYS = {"train_flops", "inference_flops", "aux_flops", "pretrain_flops", "total_flops", "flops_per_sample",
                   "flops_by_phase", "pretrained_flops", "inference_samples", "shared_pretrain_flops",
                   "per_run_flops", "diagnostics"}  # fmt: skip
DIAGNOSTIC_PREFIX = "wm_"
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-7  # across CPU models only: float rounding of the same arithmetic


def figures(run_dir: Path) -> dict[str, Any]:
    """The deterministic part of a run directory: summary keys, metrics.jsonl's rows and their digest."""
    summary = json.loads((run_dir / "summary.json").read_text())
    kept = {k: v for k, v in summary.items() if k not in TIMING_KEYS and not k.startswith(DIAGNOSTIC_PREFIX)}
    diagnostics = {k: v for k, v in summary.items() if k.startswith(DIAGNOSTIC_PREFIX)}
    if diagnostics:
        kept["diagnostics"] = diagnostics
    digest = hashlib.sha256()
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = {k: v for k, v in json.loads(line).items() if k not in METRIC_TIMING_KEYS}
        digest.update(json.dumps(row, sort_keys=True).encode())
        rows.append(row)
    kept["metrics_jsonl"] = {"lines": len(rows), "sha256": digest.hexdigest(), "rows": rows}
    return kept


def _close(before: Any, after: Any) -> bool:
    if isinstance(before, dict) and isinstance(after, dict):
        return before.keys() == after.keys() and all(_close(before[k], after[k]) for k in before)
    if isinstance(before, list) and isinstance(after, list):
        return len(before) == len(after) and all(_close(a, b) for a, b in zip(before, after, strict=True))
    if isinstance(before, float | int) and isinstance(after, float | int) and not isinstance(before, bool):
        return math.isclose(before, after, rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL)
    return before == after


def verdict(before: dict[str, Any], after: dict[str, Any], same_cpu: bool) -> tuple[bool, str]:
    """(ok, one line): summary figures must match exactly; on another CPU model, per-update metrics
    may differ in float rounding (conv kernels pick CPU-specific code paths) but not beyond it."""
    diff = differences(before, after)
    if not diff:
        return True, "identical"
    only_metrics = all(d.startswith(("metrics_jsonl.", "diagnostics.")) for d in diff)
    rows_before = before.get("metrics_jsonl", {}).get("rows")
    rows_after = after.get("metrics_jsonl", {}).get("rows")
    close = _close(rows_before, rows_after) and _close(before.get("diagnostics"), after.get("diagnostics"))
    if only_metrics and not same_cpu and rows_before is not None and close:
        return True, f"summary identical; metrics.jsonl within float rounding (rel {FLOAT_RTOL:g}) on another CPU"
    return False, "DIFFERS: " + "; ".join(d[:300] for d in diff[:6])


def cpu_model() -> str:
    """The CPU's model name, torch's kernel capability and a digest of its flags: what picks the code paths."""
    import torch

    import _report  # next to this script (run as a script, its folder is on sys.path)

    flags = ""
    with contextlib.suppress(OSError, StopIteration):
        line = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        flags = line.split(":", 1)[1].strip()
    capability = torch.backends.cpu.get_cpu_capability()
    return f"{_report.cpu_model()}, {capability}, flags {hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def run_one(name: str, out: Path) -> dict[str, Any]:
    """Train config ``name`` into ``out`` (this process); its figures."""
    import torch

    from frugalrl.config import load_config
    from frugalrl.train import train

    torch.set_num_threads(1)
    path, overrides = RUNS[name]
    config = load_config(REPO / path, [*overrides, "tracking.enabled=false", "threads=1"])
    train(config, out, interactive=False)
    return figures(out)


def run_all(names: list[str]) -> dict[str, Any]:
    """Every config in a fresh process, so no run sees another's global state."""
    results = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": "file:///dev/null"}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = Path(tmp) / name
            proc = subprocess.run(
                [sys.executable, __file__, "--one", name, "--out", str(out)],
                capture_output=True, text=True, env=env, cwd=tmp,
            )  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"{name}: run failed (exit {proc.returncode})\n{proc.stdout[-2000:]}{proc.stderr}")
            results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def differences(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Every key path whose value differs (exactly; floats included)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in dict.fromkeys([*before, *after]):
            if key not in after:
                out.append(f"{prefix}{key}: missing after")
            elif key not in before:
                out.append(f"{prefix}{key}: new after")
            else:
                out += differences(before[key], after[key], f"{prefix}{key}.")
        return out
    return [] if before == after else [f"{prefix.rstrip('.')}: {before!r} -> {after!r}"]


def update_accounting(paths: list[Path], names: list[str]) -> int:
    """Re-run; where every non-accounting figure matches a recording, replace its accounting keys."""
    results = run_all(names)
    failed = False
    for path in paths:
        recording = json.loads(path.read_text())
        same_cpu = recording.get("_machine", {}).get("cpu") == cpu_model()
        for name in names:
            before = {k: v for k, v in recording.get(name, {}).items() if k not in ACCOUNTING_KEYS}
            after = {k: v for k, v in results[name].items() if k not in ACCOUNTING_KEYS}
            ok, line = verdict(before, after, same_cpu)
            # Recorded on another CPU, a latent run's per-update metrics may round differently; its summary
            # (the sample counts the FLOPs are multiplied by) must still be identical.
            ok = ok or (not same_cpu and all(d.startswith("metrics_jsonl.") for d in differences(before, after)))
            if not ok:
                failed = True
                print(f"{path.name}: {name:<22} not updated, learning figures differ: {line}")
                continue
            # The world-model diagnostics are float figures of this CPU's arithmetic: they go only into
            # the recording made on it (another CPU's recording keeps its own, updated on that CPU).
            written = ACCOUNTING_KEYS if same_cpu else ACCOUNTING_KEYS - {"diagnostics"}
            kept = {k: v for k, v in recording[name].items() if k not in written}
            recording[name] = {**kept, **{k: v for k, v in results[name].items() if k in written}}
        path.write_text(json.dumps(recording, indent=2, sort_keys=True) + "\n")
        print(f"{path}: accounting keys updated")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, help="write the figures of every config here")
    parser.add_argument(
        "--check", type=Path, nargs="+", help="re-run and compare with the recording made on this CPU (else the first)"
    )
    parser.add_argument("--update-accounting", type=Path, nargs="+",
                        help="re-run; if only the meter's bookkeeping changed, write it into these")  # fmt: skip
    parser.add_argument("--only", nargs="*", default=None, help="a subset of the configs")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one, args.out)))
        return 0
    names = args.only or list(RUNS)
    if args.record:
        results = {"_machine": {"cpu": cpu_model()}, **run_all(names)}
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(f"recorded {len(results) - 1} configs in {args.record}")
        return 0
    if args.check:
        recordings = [json.loads(path.read_text()) for path in args.check]
        here = [r for r in recordings if r.get("_machine", {}).get("cpu") == cpu_model()]
        # Else one made on the same model and kernel capability (the code paths; other flags differ
        # between hosts of one cloud machine type), else the first.
        kin = [r for r in recordings if r.get("_machine", {}).get("cpu", "").split(", flags")[0]
               == cpu_model().split(", flags")[0]]  # fmt: skip
        recorded = (here or kin or recordings)[0]
        recorded_cpu = recorded.get("_machine", {}).get("cpu")
        same_cpu = recorded_cpu == cpu_model()
        if not same_cpu:
            print(f"recorded on CPU {recorded_cpu!r}, checking on {cpu_model()!r}")
        results = run_all(names)
        failed = False
        for name in names:
            ok, line = verdict(recorded.get(name, {}), results[name], same_cpu)
            failed |= not ok
            print(f"{name:<22} {line}")
        return 1 if failed else 0
    if args.update_accounting:
        return update_accounting(args.update_accounting, names)
    parser.error("give --record PATH, --check PATH or --update-accounting PATH")
    return 2


if __name__ == "__main__":
    sys.exit(main())
