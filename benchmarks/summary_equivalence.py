"""Equivalence check for refactors: short runs of the shipped configs, their deterministic figures compared.

    python -m benchmarks.summary_equivalence --record benchmarks/results/summary_equivalence_baseline.json
    python -m benchmarks.summary_equivalence --check benchmarks/results/summary_equivalence_baseline.json

Each config runs in its own process (one torch thread, the config's seed, tracking off) with
overrides that make it take seconds. What is compared: every summary.json key except the clock,
memory and provenance ones (``TIMING_KEYS``), and every row of metrics.jsonl without its
throughput column.

How, on every host, the recording's own included (so a new or re-imaged host needs no recording):

- exactly: counts (updates, env steps, gradient steps, the FLOP bookkeeping ``EXACT_KEYS``),
  the config hash, strings, booleans, which keys and how many rows there are;
- within float rounding (``FLOAT_RTOL`` relative, ``FLOAT_ATOL`` absolute): every float figure
  (returns, losses, the world-model diagnostics ``wm_*``). Another CPU takes other kernel paths
  (the latent runs' convolutions), and float32 sums of O(1) terms that nearly cancel (a policy
  loss of 1e-5) carry an absolute rounding of a few float32 epsilons (1.2e-7): measured between
  the AVX2 and two AVX-512 hosts, at most 1.7e-7 absolute, 1.1e-4 relative on a figure near zero.
  No digest over float rows is compared: it would only say "not bit-identical".

What the tolerance catches: any change of a count or of the config (one more update, another
batch size), and any change of the learning that moves a figure by more than 1e-4 relative and
1e-6 absolute (a changed learning rate, loss coefficient or seed, a reordered update: each
moves losses in the first digits within an update or two). What it cannot catch: a change whose
effect on every figure stays below that (a reassociated sum, an epsilon of 1e-8), which is a
change of rounding, not of the algorithm. And where another CPU's rounding flips a discrete
choice (a sampled action, an episode's end), the runs part and the check fails there; that is a
difference to look at, and only where it proves to be rounding by CPU vendor (the same figures on
every host of that vendor) are that vendor's figures kept beside the main ones (below).

A recording holds only values measured on the CPU it names (``_machine``): ``--record`` writes
this host's figures; ``--update-accounting`` (a change to the cost meter's bookkeeping alone, or a
new config key, whose default changes every config's hash) re-runs, requires every learning figure
to match the main figures or those kept for this CPU's vendor, and writes the FLOP bookkeeping
(counts computed from shapes and sample counts) and the config hashes, the same on every CPU, into
the main figures and every vendor's kept ones; it writes the world-model diagnostics only into figures
of this CPU, and refuses another CPU's recording whose diagnostics moved beyond the tolerance
(re-record it with ``--record``).

One run parts between CPU vendors: ``pendulum-sac``'s SAC critic losses drift 2e-4 apart by update 189
on an AMD EPYC against an Intel Xeon (both AVX-512; kernel choices by vendor), and its eval returns by
0.2% at the end; the same figures come back on every AMD host measured (AVX2 at 713418d, AVX-512
now). The recording keeps those figures under ``_parted`` (``--record --parted`` on such a host
writes them): a run that misses the main figures is compared with its vendor's, under the same rule,
and says so. Every other config matches one recording on every host. The main figures are an AMD EPYC
host's. Since SAC and DQN step with Adam's fused kernel (``sac.fused_adam``, ``dqn.fused_adam``; 2026-12-06)
``pendulum-sac``'s figures moved by rounding (eval -1333.07 -> -1335.77 here; with ``fused_adam: false`` they
are the earlier ones exactly), so the Intel Xeon figures kept before under ``_parted`` no longer hold and were
dropped; an Intel Xeon host (AVX-512) recorded them again with ``--record --parted`` on 2026-12-06
(eval -1336.24 against the AMD figures' -1335.77; the commit is in the figures' ``_machine``).
Since SAC's gradient step is written out (``sac.fused_step``, the default; 2026-12-07), ``pendulum-sac``
runs SAC's autograd step (``sac.fused_step=false``): its figures are the recorded ones exactly, on both
vendors, so the run loop around it is checked as before; the written-out step computes the same gradients
up to rounding and is held to that reference by ``tests/test_sac_step.py`` (one step's gradients, and a
run's losses and weights after 100 updates).

``summary_equivalence_before.json`` is the recording made before the run-loop refactor (digests
only, another machine; kept for the record, not checked).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import _harness, _report

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
                                                       "selection.settings.warmup_steps=512",
                                                       "checkpoint.every_updates=3"]),
    "cartpole-dqn": ("configs/cartpole-dqn.yaml", ["dqn.total_timesteps=1536", "dqn.learning_starts=512",
                                                   "dqn.gradient_steps=16", "eval.episodes=3"]),
    # SAC's autograd step, the reference: its figures are the same on every host of a CPU vendor, and the
    # written-out default step is held to it by tests/test_sac_step.py (see the docstring)
    "pendulum-sac": ("configs/pendulum-sac.yaml", ["sac.total_timesteps=300", "eval.episodes=2",
                                                   "sac.fused_step=false"]),
    "breakout-latent": ("configs/breakout-latent.yaml", _LATENT_SMALL),
    "breakout-latent-lora": ("configs/breakout-latent.yaml", [*_LATENT_SMALL, "latent.encoder_adapter=lora",
                                                              "latent.lora_rank=2"]),
}  # fmt: skip
# Clock, memory and provenance: they differ between any two runs.
TIMING_KEYS = {"wall_s", "env_s", "act_s", "learn_s", "eval_s", "cpu_s", "eval_cpu_s", "peak_rss_mb", "peak_gpu_mb",
               "git_commit", "mlflow_run_id", "model_uri"}  # fmt: skip
METRIC_TIMING_KEYS = {"sps", "cpu_s"}
# The meter's bookkeeping: a change in what is counted (or how it is classed) changes these and nothing
# else. ``--update-accounting`` re-runs, checks that every other figure is unchanged, and writes the new
# bookkeeping into every recording (FLOP counts depend on shapes and sample counts, not on the CPU).
# ``diagnostics``: figures a run reports after learning, which learning never reads (the latent runs'
# world-model quality, ``wm_*``); they are written the same way, and compared like per-update metrics.
ACCOUNTING_KEYS = {"train_flops", "inference_flops", "aux_flops", "pretrain_flops", "total_flops", "flops_per_sample",
                   "flops_by_phase", "pretrained_flops", "inference_samples", "shared_pretrain_flops",
                   "per_run_flops", "diagnostics"}  # fmt: skip
# Decided by the config alone, the same on every CPU: a new config key (its default) changes every config's hash.
# ``--update-accounting`` writes it like the bookkeeping.
CONFIG_KEYS = {"config_hash"}
DIAGNOSTIC_PREFIX = "wm_"
PARTED = "_parted"  # CPU vendor -> config -> its figures, for a run that parts between vendors (docstring)
# Float rounding of the same arithmetic (see the docstring for what it can and cannot catch).
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-6


def figures(run_dir: Path) -> dict[str, Any]:
    """The deterministic part of a run directory: summary keys and metrics.jsonl's rows."""
    summary = json.loads((run_dir / "summary.json").read_text())
    kept = {k: v for k, v in summary.items() if k not in TIMING_KEYS and not k.startswith(DIAGNOSTIC_PREFIX)}
    diagnostics = {k: v for k, v in summary.items() if k.startswith(DIAGNOSTIC_PREFIX)}
    if diagnostics:
        kept["diagnostics"] = diagnostics
    rows = [
        {k: v for k, v in json.loads(line).items() if k not in METRIC_TIMING_KEYS}
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    kept["metrics_jsonl"] = {"lines": len(rows), "rows": rows}
    return kept


# The FLOP bookkeeping is computed from shapes and sample counts, in Python: floats, but counts.
EXACT_KEYS = ACCOUNTING_KEYS - {"diagnostics"}


def differences(before: Any, after: Any, prefix: str = "", exact: bool = False) -> list[str]:
    """Every key path whose value differs: floats beyond rounding (but under ``EXACT_KEYS``, and
    everything that is not a float, at all)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in dict.fromkeys([*before, *after]):
            if key not in after:
                out.append(f"{prefix}{key}: missing after")
            elif key not in before:
                out.append(f"{prefix}{key}: new after")
            else:
                out += differences(before[key], after[key], f"{prefix}{key}.", exact or key in EXACT_KEYS)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        pairs = enumerate(zip(before, after, strict=True))
        return [d for i, (b, a) in pairs for d in differences(b, a, f"{prefix}{i}.", exact)]
    rounded = isinstance(before, float) or isinstance(after, float)
    if rounded and not exact and _is_number(before) and _is_number(after):
        close = math.isclose(before, after, rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL)
        return [] if close else [f"{prefix.rstrip('.')}: {before!r} -> {after!r}"]
    same = before == after and type(before) is type(after)  # counts, strings, booleans, None: exactly
    return [] if same else [f"{prefix.rstrip('.')}: {before!r} -> {after!r}"]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def verdict(before: dict[str, Any], after: dict[str, Any]) -> tuple[bool, str]:
    """(ok, one line): non-floats equal, floats within rounding (the same rule on every host)."""
    diff = differences(before, after)
    if not diff:
        return True, "equal (floats within rounding)" if before != after else "identical"
    return False, "DIFFERS: " + "; ".join(d[:300] for d in diff[:6])


def cpu_model() -> str:
    """The CPU's model name, torch's kernel capability and a digest of its flags: what picks the code paths."""
    import torch

    flags = ""
    with contextlib.suppress(OSError, StopIteration):
        line = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        flags = line.split(":", 1)[1].strip()
    capability = torch.backends.cpu.get_cpu_capability()
    return f"{_report.cpu_model()}, {capability}, flags {hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def run_one(name: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """Train config ``name`` (with ``extra`` overrides after its own) into ``out`` (this process); its figures."""
    import torch

    from frugalrl.config import load_config
    from frugalrl.training import train

    torch.set_num_threads(1)
    path, overrides = RUNS[name]
    config = load_config(REPO / path, [*overrides, *extra, "tracking.enabled=false", "threads=1"])
    train(config, out, interactive=False)
    return figures(out)


def run_all(names: list[str], extra: list[str] = ()) -> dict[str, Any]:
    """Every config in a fresh process (``_harness.worker``), so no run sees another's global state."""
    env = {"OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": "file:///dev/null"}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            args = ["--one", name, "--out", str(Path(tmp) / name), *[a for value in extra for a in ("--set", value)]]
            try:
                results[name] = _harness.worker(__spec__.name, args, env=env, cwd=Path(tmp))
            except RuntimeError as error:
                raise SystemExit(f"{name}: run failed\n{error}") from None
    return results


def update_accounting(paths: list[Path], names: list[str]) -> int:
    """Re-run; where every learning figure matches a recording (its main figures, or those it keeps for this
    CPU's vendor under ``_parted``), replace its FLOP bookkeeping and config hashes (``ACCOUNTING_KEYS``,
    ``CONFIG_KEYS``: the same on every CPU) in both, and on the recording's own CPU its diagnostics. Another
    CPU's floats never enter a recording."""
    results = run_all(names)
    replaced = ACCOUNTING_KEYS | CONFIG_KEYS
    vendor = cpu_model().split(",")[0]
    failed = False
    for path in paths:
        recording = json.loads(path.read_text())
        parted = recording.get(PARTED, {}).get(vendor, {})
        for name in names:
            after = {k: v for k, v in results[name].items() if k not in replaced}
            kept_for = {"main": recording.get(name, {})}
            if name in parted:
                kept_for["parted"] = {k: v for k, v in parted[name].items() if k != "_machine"}
            matches = [which for which, figures in kept_for.items()
                       if verdict({k: v for k, v in figures.items() if k not in replaced}, after)[0]]  # fmt: skip
            if not matches:
                failed = True
                line = verdict({k: v for k, v in kept_for["main"].items() if k not in replaced}, after)[1]
                print(f"{path.name}: {name:<22} not updated, learning figures differ: {line}")
                continue
            same_cpu = {"main": recording.get("_machine", {}).get("cpu") == cpu_model()}
            if "parted" in kept_for:
                same_cpu["parted"] = parted[name].get("_machine", {}).get("cpu") == cpu_model()
            moved = differences(kept_for["main"].get("diagnostics"), results[name].get("diagnostics"))
            if moved and not same_cpu["main"]:
                failed = True
                print(f"{path.name}: {name:<22} not updated, its diagnostics moved and were measured on another "
                      f"CPU; re-record it with --record on this host")  # fmt: skip
                continue
            # every vendor's kept figures of this run take the CPU-independent keys; diagnostics only on their CPU
            targets = [("main", recording), *([("parted", parted)] if "parted" in kept_for else [])]
            targets += [("other vendor", v) for k, v in recording.get(PARTED, {}).items() if k != vendor and name in v]
            for which, target in targets:
                written = replaced if same_cpu.get(which) else replaced - {"diagnostics"}
                kept = {k: v for k, v in target[name].items() if k not in written}
                target[name] = {**kept, **{k: v for k, v in results[name].items() if k in written}}
        path.write_text(json.dumps(recording, indent=2, sort_keys=True) + "\n")
        print(f"{path}: accounting keys and config hashes updated")
    return 1 if failed else 0


def check(paths: list[Path], names: list[str], extra: list[str] = ()) -> int:
    """Re-run and compare with every recording (one rule on every host); 1 on any difference."""
    recordings = {path: json.loads(path.read_text()) for path in paths}
    results = run_all(names, extra)
    failed = False
    for path, recorded in recordings.items():
        print(f"{path.name}: recorded on {recorded.get('_machine', {}).get('cpu')!r}, checking on {cpu_model()!r}")
        for name in names:
            ok, line = verdict(recorded.get(name, {}), results[name])
            vendor = cpu_model().split(",")[0]
            parted = recorded.get(PARTED, {}).get(vendor, {}).get(name)
            if not ok and parted is not None:
                ok, line = verdict({k: v for k, v in parted.items() if k != "_machine"}, results[name])
                line += f" (to the figures kept for {vendor} CPUs, where this run parts by rounding)"
            failed |= not ok
            print(f"{name:<22} {line}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, help="write this host's figures of every config here")
    parser.add_argument("--check", type=Path, nargs="+", help="re-run and compare with each of these recordings")
    parser.add_argument("--update-accounting", type=Path, nargs="+",
                        help="re-run; if only bookkeeping or config hashes changed, write them there")  # fmt: skip
    parser.add_argument("--only", nargs="*", default=None, help="a subset of the configs")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                        help="one more override for every run (to see what the check catches)")  # fmt: skip
    parser.add_argument("--parted", action="store_true",
                        help="with --record PATH: keep this host's figures as its CPU vendor's in PATH")  # fmt: skip
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _harness.write_result(run_one(args.one, args.out, args.extra), args.result)
        return 0
    names = args.only or list(RUNS)
    if args.record:
        if args.extra:
            parser.error("--record keeps the shipped configs' figures; --set is for --check")
        machine = {"cpu": cpu_model(), "recorded_with_commit": _report.git_commit()}
        if args.parted:  # into the existing recording, beside its main figures
            recording = json.loads(args.record.read_text())
            vendor = recording.setdefault(PARTED, {}).setdefault(cpu_model().split(",")[0], {})
            vendor.update({name: {**figures, "_machine": machine} for name, figures in run_all(names).items()})
            args.record.write_text(json.dumps(recording, indent=2, sort_keys=True) + "\n")
            print(f"kept {len(names)} configs' figures for this CPU vendor in {args.record}")
            return 0
        results = {"_machine": machine, **run_all(names)}
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(f"recorded {len(results) - 1} configs in {args.record}")
        return 0
    if args.check:
        return check(args.check, names, args.extra)
    if args.update_accounting:
        return update_accounting(args.update_accounting, names)
    parser.error("give --record PATH, --check PATH or --update-accounting PATH")
    return 2


if __name__ == "__main__":
    sys.exit(main())
