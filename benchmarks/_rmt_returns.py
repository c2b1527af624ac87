"""What the RMT returns table compares and how it judges, shared by ``rmt_returns`` and the claims ledger."""

from __future__ import annotations

import argparse
import statistics

from . import _report

CONTENDERS = {  # name: (config, env steps, the key that sets them)
    "rmt-dqn": ("configs/lunarlander-rmt.yaml", 1_000_000, "dqn.total_timesteps"),
    "ppo": ("configs/lunarlander-ppo.yaml", 1_000_000, "ppo.total_timesteps"),
    "sac": ("configs/lunarlandercontinuous-sac.yaml", 300_000, "sac.total_timesteps"),
}
CLAIMED = {"rmt-dqn": 285.0, "ppo": 198.0, "sac": 231.0}  # the seed's LunarLander returns after 1M steps
SEEDS = 3
PROBES = {  # env: (config, its algo (the config section the probe sets), claimed return after 1M steps)
    "BipedalWalker-v3": ("configs/bipedalwalker-rmt.yaml", "sac", 312.0),
    "ALE/Breakout-v5": ("configs/breakout-rmt.yaml", "dqn", 452.0),
}
PROBE_STEPS = 6_000
PROBE_LEARNING_STARTS = 2_000
TARGET = 200.0  # LunarLander's reward threshold


def select(rows: list[dict], args: argparse.Namespace | None = None) -> list[dict]:
    """Every kept row: the newest run per (contender, seed) at its contender's budget, the newest probe per env."""
    newest: dict[tuple, dict] = {}
    for r in rows:
        if r.get("kind") == "run" and r["budget"] == CONTENDERS[r["contender"]][1]:
            newest[("run", r["contender"], r["seed"])] = r
        elif r.get("kind") == "probe":
            newest[("probe", r["env"])] = r
    return list(newest.values())


def verdict(runs: list[dict]) -> tuple[str, str]:
    """(what was measured, the verdict) by the rule in the docstring."""
    by = {c: [r["eval_mean"] for r in runs if r["contender"] == c] for c in CONTENDERS}
    parts = []
    for c, (_, steps, _) in CONTENDERS.items():
        if by[c]:
            seeds = f"{len(by[c])} seed{'s' if len(by[c]) > 1 else ''}"
            parts.append(f"{c} {_report.fmt_mmm(by[c], '{:.1f}')} ({seeds}, {steps:,} steps)")
    measured = "; ".join(parts) or "none yet"
    short = [f"{c} {len(v)} of {SEEDS}" for c, v in by.items() if len(v) < SEEDS]
    done = {c: statistics.median(v) for c, v in by.items() if len(v) >= SEEDS}
    # RMT DQN below a peer with all its seeds is refuted, whatever a third contender's missing seeds give
    below = [name for c, name in (("ppo", "PPO's"), ("sac", "SAC's (300k)"))
             if "rmt-dqn" in done and c in done and done["rmt-dqn"] < done[c]]  # fmt: skip
    if below:
        pending = f"; {', '.join(short)} seeds so far, which cannot change it" if short else ""
        return measured, f"refuted (RMT DQN's median below {' and '.join(below)}{pending})"
    if short:
        return measured, f"not yet measured ({', '.join(short)} seeds so far)"
    rmt, ppo, sac = (done[c] for c in ("rmt-dqn", "ppo", "sac"))
    need_ppo = (CLAIMED["rmt-dqn"] - CLAIMED["ppo"]) / 2
    need_sac = (CLAIMED["rmt-dqn"] - CLAIMED["sac"]) / 2
    if rmt - ppo >= need_ppo and rmt - sac >= need_sac:
        return measured, "confirmed (above both by at least half the claimed margins; SAC at 300k)"
    return measured, "partly (above both medians, by less than half the claimed margins; SAC at 300k)"


def probe_hours(probe: dict) -> float:
    """Hours that 1M env steps x ``SEEDS`` seeds of the probed config (learning from its own learning_starts)
    would take at the probe's rates."""
    steps = 1_000_000
    per_run = probe["other_s_per_step"] * steps + probe["learn_s_per_step"] * (steps - probe["shipped_learning_starts"])
    return per_run * SEEDS / 3600
