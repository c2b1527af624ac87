"""From a race's rows to its figures and its decision.

Per contender: the IQM of the final scores over seeds with a stratified-bootstrap 95% interval, the
probability that one of its runs scores above one of the control's (ties half), the paired difference from
the control seed by seed (mean, 95% percentile-bootstrap interval), the median training CPU-seconds and
env steps, and compute-to-threshold: the CPU-seconds each run needed for its training return (the learner's
running mean of recent episodes) to reach the control's final training return (IQM over the control's
runs), the same measure on both sides.

The decision: a contender is declared better only when the interval of its paired difference excludes 0 on
the better side, worse when it excludes 0 on the other; otherwise no difference is shown. With fewer than
``MIN_SEEDS`` paired seeds no verdict is given. The winner is the better contender with the highest IQM,
else the control.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from frugalrl.stats import (
    interquartile_mean,
    paired_bootstrap,
    probability_of_improvement,
    stratified_bootstrap_iqm,
)

MIN_SEEDS = 5  # fewer paired seeds: "too few seeds to decide"
LEVEL = 0.95

CONTROL = "control"
BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no difference shown"
TOO_FEW = "too few seeds to decide"


@dataclass(frozen=True)
class Verdict:
    """One contender's figures and verdict."""

    name: str
    runs: int
    iqm: tuple[float, float, float]  # point, low, high
    improvement: tuple[float, float, float] | None  # P(a run beats a control run); None for the control
    paired: tuple[float, float, float] | None  # mean paired difference from the control, low, high
    paired_seeds: int
    train_cpu_s: float  # median
    env_steps: float | None  # median
    reached: int  # runs whose training return reached the threshold
    cpu_to_threshold: float | None  # median over the runs that reached it
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _final(row: dict[str, Any]) -> float | None:
    return row["curve"][-1][1] if row.get("curve") else None


def _cpu_to(row: dict[str, Any], threshold: float) -> float | None:
    return next((cpu for cpu, value in row.get("curve") or [] if value >= threshold), None)


def threshold(control_rows: Sequence[dict[str, Any]]) -> float | None:
    """The control's final training return, IQM over its runs (None without curves)."""
    finals = [f for f in map(_final, control_rows) if f is not None]
    return interquartile_mean(finals) if finals else None


def judge(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> tuple[list[Verdict], str, float | None]:
    """Every contender's ``Verdict`` (``names[0]`` the control), the winner, and the compute threshold."""
    by = {name: sorted((r for r in rows if r["contender"] == name), key=lambda r: r["seed"]) for name in names}
    control = by[names[0]]
    control_score = {r["seed"]: r["score"] for r in control}
    bar = threshold(control)
    verdicts = []
    for name in names:
        runs = by[name]
        if not runs:
            continue
        scores = [r["score"] for r in runs]
        iqm = stratified_bootstrap_iqm({"task": scores})
        reached = [c for c in (_cpu_to(r, bar) for r in runs) if c is not None] if bar is not None else []
        steps = [r["env_steps"] for r in runs if r.get("env_steps") is not None]
        common = [r for r in runs if r["seed"] in control_score]
        improvement = paired = None
        if name == names[0]:
            verdict = CONTROL
        else:
            improvement = probability_of_improvement(scores, [r["score"] for r in control]) if control else None
            if common:
                ours = np.array([r["score"] for r in common])
                theirs = np.array([control_score[r["seed"]] for r in common])
                low, high = paired_bootstrap(ours, theirs, LEVEL)
                paired = (float((ours - theirs).mean()), low, high)
            verdict = _verdict(paired, len(common))
        verdicts.append(Verdict(
            name=name, runs=len(runs), iqm=iqm, improvement=improvement, paired=paired, paired_seeds=len(common),
            train_cpu_s=statistics.median(r["train_cpu_s"] for r in runs),
            env_steps=statistics.median(steps) if steps else None,
            reached=len(reached), cpu_to_threshold=statistics.median(reached) if reached else None,
            verdict=verdict,
        ))  # fmt: skip
    better = [v for v in verdicts if v.verdict == BETTER]
    winner = max(better, key=lambda v: v.iqm[0]).name if better else names[0]
    return verdicts, winner, bar


def _verdict(paired: tuple[float, float, float] | None, seeds: int) -> str:
    if paired is None or seeds < MIN_SEEDS:
        return TOO_FEW
    _mean, low, high = paired
    if low > 0:
        return BETTER
    if high < 0:
        return WORSE
    return NO_DIFFERENCE
