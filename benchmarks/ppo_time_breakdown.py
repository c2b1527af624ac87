"""Where PPO's time goes on CartPole-v1, and what each change took off: one table, side by side.

Variants, each a fresh subprocess per seed (RL Zoo settings, ``configs/cartpole-ppo.yaml``, 100k
env steps, one torch thread, MLflow off), alternating per seed in this order:

* ``before``        the code before these changes (``--baseline-ref``, default 872d0d6), run from a
                    ``git worktree`` of that commit: eager autograd step, ``clip_grad_norm_`` + ``Adam.step``,
                    gymnasium's envs one by one;
* ``eager``         today's code with ``ppo.compile=off`` and ``env.batched=false``: eager autograd step,
                    with the direct clip + Adam step, NumPy GAE and the cheaper timers;
* ``eager+batched`` as ``eager`` with the batched CartPole env;
* ``fused``         the default (``ppo.compile=auto`` resolves to the hand-fused step and NumPy acting);
* ``inductor``      ``ppo.compile=inductor`` (torch.compile, C++ kernels; its compile time is in the figure).

Reported per variant (medians over seeds, min-max): training wall-clock (``train()`` minus the final
evaluation), and the cost meter's split of it: env stepping (``env_s``), acting (``act_s``), learning
(``learn_s``: GAE + every optimizer step) and the rest (rollout bookkeeping, checkpoints, export); the
learner's milliseconds per optimizer step; the ratio to ``before`` (ratio of medians and median of
per-seed ratios); the final eval return (20 deterministic episodes).

    python -m benchmarks.ppo_time_breakdown --seeds 3 --write      # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from . import _harness, _report
from ._report import mmm as fmt

RESULTS = _report.RESULTS_DIR / "ppo_time_breakdown.jsonl"
CONFIG = _report.REPO_ROOT / "configs" / "cartpole-ppo.yaml"
VARIANTS = {
    "before": [],
    "eager": ["ppo.compile=off", "env.batched=false"],
    "eager+batched": ["ppo.compile=off"],
    "fused": [],
    "inductor": ["ppo.compile=inductor"],
}


def worker(src: str, overrides: list[str], seed: int, timesteps: int) -> dict:
    """One training run in this process (called in a fresh subprocess whose ``PYTHONPATH`` starts with ``src``)."""
    import torch

    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401  - torch.optim imports it lazily; keep imports out of the clock

    import frugalrl
    from frugalrl.config import load_config
    from frugalrl.training import train

    # An installed frugalrl found first would time today's code under the ``before`` label.
    if not Path(frugalrl.__file__).resolve().is_relative_to(Path(src).resolve()):
        raise RuntimeError(f"frugalrl imported from {frugalrl.__file__}, not from {src}")

    cfg = load_config(
        CONFIG, ["tracking.enabled=false", "threads=1", f"seed={seed}", f"ppo.total_timesteps={timesteps}", *overrides]
    )
    with tempfile.TemporaryDirectory(prefix="frugalrl-breakdown-") as tmp:
        started = time.perf_counter()
        summary = train(cfg, Path(tmp) / "run", interactive=False)
        total = time.perf_counter() - started
    keys = ("env_s", "act_s", "learn_s", "eval_mean", "optimizer_steps", "backward_samples", "compile")
    return {"train_s": total - summary["eval_s"], **{k: summary.get(k) for k in keys}}


def run(variant: str, src: Path, seed: int, timesteps: int) -> dict:
    args = [
        "--worker",
        src,
        "--seed",
        seed,
        "--timesteps",
        timesteps,
        *[a for s in VARIANTS[variant] for a in ("--set", s)],
    ]
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        # A cold compile cache for every run: what a user's first run pays, not a cache left by the last one.
        # ``src`` first on the worker's path: the checkout (today's or the ``before`` worktree) whose code it times
        return _harness.worker(__spec__.name, args, env={"TORCHINDUCTOR_CACHE_DIR": cache, "PYTHONPATH": str(src)})


def baseline_tree(ref: str) -> Path:
    """A worktree of ``ref`` under the temp dir (made once, reused)."""
    path = Path(tempfile.gettempdir()) / f"frugalrl-baseline-{ref}"
    if not (path / "src" / "frugalrl").exists():
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(path), ref], cwd=_report.REPO_ROOT, check=True)
    return path


def report(rows: list[dict], results: Path) -> str:
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    by = {(r["variant"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    table = []
    for variant in variants:
        mine = [by[(variant, s)] for s in seeds if (variant, s) in by]
        train = [r["train_s"] for r in mine]
        parts = {k: [r[k] for r in mine if r.get(k) is not None] for k in ("env_s", "act_s", "learn_s")}
        rest = [r["train_s"] - sum(r.get(k) or 0.0 for k in ("env_s", "act_s", "learn_s")) for r in mine]
        per_step = [1e3 * r["learn_s"] / r["optimizer_steps"] for r in mine if r.get("optimizer_steps")]
        before = [by[("before", s)]["train_s"] for s in seeds if ("before", s) in by]
        mine_s, before_s = ({s: by[(v, s)]["train_s"] for s in seeds if (v, s) in by} for v in (variant, "before"))
        paired = _report.paired_ratio(_report.pair_up(mine_s, before_s), medians=(train, before))
        ratio = (
            f"{paired.of_medians:.2f}; per seed {fmt(paired.per_seed, '{:.2f}')}"
            if before and variant != "before"
            else "1"
            if variant == "before"
            else "-"
        )
        table.append([
            variant, str(len(mine)), fmt(train, "{:.1f}"), fmt(parts["env_s"], "{:.1f}"), fmt(parts["act_s"], "{:.1f}"),
            fmt(parts["learn_s"], "{:.1f}"), fmt(rest, "{:.1f}"), fmt(per_step, "{:.2f}"), ratio,
            fmt([r["eval_mean"] for r in mine], "{:.1f}"),
        ])  # fmt: skip
    header = ["variant", "seeds", "training s", "env s", "act s", "learn s", "rest s", "ms per optimizer step",
              "time / before (of medians; per seed)", "eval return"]  # fmt: skip
    lines = _report.rows_lines(rows, results)
    steps = sorted({r["optimizer_steps"] for r in rows if r.get("optimizer_steps")})
    lines.append(
        f"- {rows[0].get('timesteps'):,} env steps per run, {', '.join(f'{n:,}' for n in steps)} optimizer steps "
        "(the `before` code does not count them; it runs the same schedule); variants alternate per seed in the "
        f"order of the table; `before` = commit {rows[0].get('baseline_ref')} run from a git worktree; every "
        "`inductor` run starts with an empty compile cache. Values are medians (min-max) over seeds."
    )
    return "\n".join([*lines, "", _report.markdown_table(header, table)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--baseline-ref", default="872d0d6", help="the commit the `before` variant runs")
    _report.add_output_args(parser, "ppo_time_breakdown")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        _harness.write_result(worker(args.worker, args.set, args.seed, args.timesteps), args.result)
        return

    def run_all(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common(timesteps=args.timesteps, baseline_ref=args.baseline_ref)
        trees = {v: (baseline_tree(args.baseline_ref) if v == "before" else _report.REPO_ROOT) for v in args.variants}

        def one(job: tuple[int, str]) -> dict:
            seed, variant = job
            return {"variant": variant, "seed": seed, **run(variant, trees[variant] / "src", seed, args.timesteps)}

        def line(row: dict) -> str:
            parts = f"env {row['env_s']}  act {row['act_s']}  learn {row['learn_s']}"
            return f"seed {row['seed']} {row['variant']:14s} train {row['train_s']:6.1f} s  {parts}  eval " + str(
                row["eval_mean"]
            )

        jobs = _harness.interleave(range(1, args.seeds + 1), args.variants)
        return _harness.measure(jobs, one, args.results, common, line)

    _report.run_or_render("ppo_time_breakdown", args, run_all, report,
                          lambda rows, args: _report.newest_batch(rows, timesteps=args.timesteps),
                          after=("ppo_vs_sb3",))  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
