"""RMT's long-run returns: the shipped RMT DQN against PPO and SAC on LunarLander, 3 seeds each.

The RMT seed reports returns after 1M env steps: LunarLander 285 with its parts, against 198 for PPO and 231
for SAC (and BipedalWalker 312, Breakout 452). Here each contender is a fresh ``frugalrl train`` process
(MLflow off, one torch thread), scored at the end by the config's own evaluation (20 deterministic episodes
from seed 10000):

    rmt-dqn   configs/lunarlander-rmt.yaml as shipped (Double DQN with the meta-controller, Boltzmann
              exploration, fractal blocks and score stages) on LunarLander-v3, 1M env steps
    ppo       configs/lunarlander-ppo.yaml (RL Zoo's settings) on LunarLander-v3, 1M env steps
    sac       configs/lunarlandercontinuous-sac.yaml (RL Zoo's settings, constant learning rate) on
              LunarLanderContinuous-v3, 300k env steps, labelled as such: this script runs each run in one
              go (no resume from a checkpoint across invocations), and at 1M steps one SAC run would take
              hours on a 2-core machine

The verdict rule, fixed before running: with 3 seeds of every contender, **confirmed** when rmt-dqn's median
return is above PPO's by at least half the claimed margin (87 / 2) and above SAC's by at least half its
claimed margin (54 / 2); **partly** when it is above both medians by less; **refuted** when it is below
either. SAC's budget is labelled beside its figure. Until every contender has 3 seeds the row says how many
it has; once RMT DQN and a peer both have their 3 and RMT DQN's median is below the peer's, the row says
refuted, since no seed of the third contender can change that.

``--probe`` times BipedalWalker (``configs/bipedalwalker-rmt.yaml``) and Breakout (``configs/breakout-rmt.yaml``,
one torch thread, a 100k-transition store) for a few thousand steps, learning from step 2,000, and keeps the
seconds per env step spent stepping and acting, and learning once it has started: what their 1M-step rows
would cost here (each config learning from its own ``learning_starts``).

Rows are kept as each run ends (``benchmarks/results/rmt_returns.jsonl``); a run already kept for its contender,
seed and budget is not run again, so the table fills across invocations; the section renders every kept row.

    python -m benchmarks.rmt_returns --seeds 3 --write        # every contender; each run's time is in its row
    python -m benchmarks.rmt_returns --contenders rmt-dqn --seeds 1 --write       # one part: about 70 min
    python -m benchmarks.rmt_returns --probe --write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from frugalrl.config import load_config

from . import _harness, _report
from ._rmt_returns import (
    CONTENDERS,
    PROBE_LEARNING_STARTS,
    PROBE_STEPS,
    PROBES,
    SEEDS,
    TARGET,
    probe_hours,
    select,
    verdict,
)

NAME = "rmt_returns"


def _one_run(contender: str, seed: int, workdir: Path) -> dict:
    config, steps, key = CONTENDERS[contender]
    sets = [f"seed={seed}", f"{key}={steps}"]
    run = _harness.train(_report.REPO_ROOT / config, Path(tempfile.mkdtemp(dir=workdir)) / "run", sets)
    summary = run.summary
    reached = _harness.first_reaching(run.out, TARGET)
    returns = [r["episode_return"] for r in run.metrics() if r.get("episode_return") is not None]
    return {"kind": "run", "contender": contender, "config": config, "seed": seed, "budget": steps,
            "overrides": sets, "eval_mean": summary["eval_mean"], "config_hash": summary["config_hash"],
            "real_env_steps": summary["real_env_steps"], "train_s": summary["wall_s"] - summary["eval_s"],
            "cpu_s": run.cpu_s, "last_train_return": returns[-1] if returns else None,
            "steps_to_target": int(reached["step"]) if reached else None}  # fmt: skip


def _one_probe(env: str, workdir: Path) -> dict:
    config, algo, _ = PROBES[env]
    sets = [f"{algo}.total_timesteps={PROBE_STEPS}", f"{algo}.learning_starts={PROBE_LEARNING_STARTS}",
            "replay.capacity=100000", "threads=1", "device=cpu", "eval.episodes=1"]  # fmt: skip
    run = _harness.train(_report.REPO_ROOT / config, Path(tempfile.mkdtemp(dir=workdir)) / "run", sets)
    summary, steps = run.summary, run.summary["real_env_steps"]
    train_s = summary["wall_s"] - summary["eval_s"]
    shipped = load_config(_report.REPO_ROOT / config)
    return {"kind": "probe", "env": env, "config": config, "overrides": sets, "steps": steps, "train_s": train_s,
            "cpu_s": run.cpu_s, "learn_s": summary["learn_s"],
            # per env step: stepping and acting (every step) and learning (each step after learning_starts)
            "other_s_per_step": (train_s - summary["learn_s"]) / steps,
            "learn_s_per_step": summary["learn_s"] / (steps - PROBE_LEARNING_STARTS),
            "shipped_learning_starts": getattr(shipped, algo).learning_starts}  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common()
    kept = _report.read_rows(args.results)
    with tempfile.TemporaryDirectory(prefix="rmt-returns-") as tmp:
        workdir = Path(tmp)
        if args.probe:
            _harness.measure(list(PROBES), lambda env: _one_probe(env, workdir), args.results, common,
                             lambda r: f"{r['env']}: {probe_hours(r):.0f} h for 1M steps x {SEEDS}")  # fmt: skip
        else:
            done = {(r["contender"], r["seed"], r["budget"]) for r in kept if r.get("kind") == "run"}
            order = _harness.interleave(range(1, args.seeds + 1), args.contenders)
            jobs = [(seed, c) for seed, c in order if (c, seed, CONTENDERS[c][1]) not in done]
            for seed, c in order:
                if (seed, c) not in jobs:
                    print(f"{c} seed {seed}: kept, skipped")
            _harness.measure(jobs, lambda job: _one_run(job[1], job[0], workdir), args.results, common,
                             lambda r: f"{r['contender']} seed {r['seed']}: eval {r['eval_mean']:.1f}, "
                                       f"{r['train_s']:.0f} s", workers=args.workers)  # fmt: skip
    return select(_report.read_rows(args.results), args)  # the section shows every kept row, this run's and earlier


def render(rows: list[dict], results: Path) -> str:
    runs = [r for r in rows if r.get("kind") == "run"]
    probes = [r for r in rows if r.get("kind") == "probe"]
    lines = [
        "The RMT seed's long-run returns on LunarLander: the shipped RMT DQN (`configs/lunarlander-rmt.yaml`) "
        "against PPO and SAC, each scored by 20 deterministic episodes at the end of training; the rule is the "
        "script's docstring.",
        "",
    ]
    if runs:
        lines += [*_report.rows_lines(runs, results), ""]
        measured, said = verdict(runs)
        lines += [f"**{said}**: {measured}.", ""]
        header = ["contender", "config", "env steps", "seed", "final eval (20 episodes)",
                  "last training return (100 episodes)", "first step at 200 (training)", "train s",
                  "CPU s"]  # fmt: skip
        body = [[r["contender"], f"`{r['config']}`", f"{r['budget']:,}", str(r["seed"]), f"{r['eval_mean']:.1f}",
                 "-" if r["last_train_return"] is None else f"{r['last_train_return']:.1f}",
                 "-" if r["steps_to_target"] is None else f"{r['steps_to_target']:,}",
                 f"{r['train_s']:.0f}", f"{r['cpu_s']:.0f}"]
                for r in sorted(runs, key=lambda r: (list(CONTENDERS).index(r["contender"]), r["seed"]))]  # fmt: skip
        lines.append(_report.markdown_table(header, body))
    if probes:
        lines += ["", "What the other two envs' rows would cost here (one core), from a short timed run of each "
                  f"config ({PROBE_STEPS:,} env steps, learning from step {PROBE_LEARNING_STARTS:,}):", "",
                  *_report.rows_lines(probes, results), ""]  # fmt: skip
        header = ["env", "config", "ms per env step: stepping and acting", "ms per env step: learning (once it starts)",
                  f"1M steps x {SEEDS} seeds (the config's own learning start), hours", "claimed return"]  # fmt: skip
        body = [[p["env"], f"`{p['config']}`", f"{p['other_s_per_step'] * 1000:.2f}",
                 f"{p['learn_s_per_step'] * 1000:.2f}", f"{probe_hours(p):.0f}",
                 f"{PROBES[p['env']][2]:g}"] for p in probes]  # fmt: skip
        lines.append(_report.markdown_table(header, body))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS))
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds 1..N of each contender")
    parser.add_argument("--workers", type=int, default=1, help="runs at a time (returns, not times, are compared)")
    parser.add_argument("--probe", action="store_true", help="time BipedalWalker and Breakout briefly instead")
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, select=select, after=["rmt_ablation"])


if __name__ == "__main__":
    main()
