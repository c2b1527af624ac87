"""The project's statistics, in one place: what an evaluation, the promotion gate and the benchmarks report.

- ``interquartile_mean``: the mean of the middle 50% (Agarwal et al. 2021, rliable's ``aggregate_iqm``),
  robust to a few outlier episodes or seeds.
- ``bootstrap_ci``: a percentile bootstrap interval of a mean (an evaluation's episodes).
- ``stratified_bootstrap_iqm``: the IQM over runs of several tasks with rliable's stratified-bootstrap
  interval (each replicate resamples the runs of each task apart), so the interval is over seeds.
- ``bootstrap_iqm_difference``: the IQM difference of two contenders' independent runs, with its interval.
- ``probability_of_improvement``: P(a run of X scores above a run of Y), ties counted half (rliable's
  ``probability_of_improvement``), with its stratified-bootstrap interval.
- ``paired_bootstrap``, ``paired_one_sided``, ``welch_one_sided``: the promotion gate's tests of
  "a beats b" (paired by seed where the seeds match); ``paired_bootstrap`` is also the race's decision.

Every resampling is seeded: the same numbers in give the same interval out. Why not rliable itself:
its newest release (1.2.0) needs ``arch<8``, arch 7 fails to import under pandas 3 (this project's
pin), and arch 8 rejects the ``random_state`` keyword rliable passes; ``benchmarks/rliable_check.py``
computes the equal-CPU table's intervals with rliable in a venv of its own, beside these, and
``benchmarks/rliable_improvement.py`` the races' probabilities of improvement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """Mean of the middle 50%: the 25% lowest and the 25% highest values left out (``floor(n / 4)`` each)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    lo, hi = int(np.floor(n * 0.25)), int(np.ceil(n * 0.75))
    middle = ordered[lo:hi] if hi > lo else ordered
    return float(middle.mean())


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return float(values.mean()), float(values.mean())
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(resamples, len(values)), replace=True).mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def stratified_bootstrap_iqm(
    runs: Mapping[str, Sequence[float]], reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """IQM over every run of every task, with a stratified-bootstrap percentile interval (rliable's method:
    each replicate resamples the runs of each task with replacement, tasks kept apart, so the interval is
    over runs (seeds), not pooled episodes). ``runs``: task -> one score per run."""
    tasks = [np.asarray(v, dtype=float) for v in runs.values() if len(v)]
    point = interquartile_mean(np.concatenate(tasks))
    rng = np.random.default_rng(seed)
    samples = [
        interquartile_mean(np.concatenate([t[rng.integers(0, len(t), len(t))] for t in tasks])) for _ in range(reps)
    ]
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return point, float(low), float(high)


def bootstrap_iqm_difference(
    a: Sequence[float], b: Sequence[float], reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """``IQM(a) - IQM(b)`` for two contenders' runs on one task, with a percentile interval from replicates
    that resample each contender's runs apart (they are independent runs, not pairs). An interval that
    excludes 0 says the two differ at this level; one that holds 0 says these runs cannot tell."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    samples = [
        interquartile_mean(a[rng.integers(0, len(a), len(a))]) - interquartile_mean(b[rng.integers(0, len(b), len(b))])
        for _ in range(reps)
    ]
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return interquartile_mean(a) - interquartile_mean(b), float(low), float(high)


def _improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) + P(X = Y) / 2 over every pair of one run of x and one of y (the Mann-Whitney U over n*m)."""
    greater = (x[:, None] > y[None, :]).mean()
    equal = (x[:, None] == y[None, :]).mean()
    return float(greater + 0.5 * equal)


def probability_of_improvement(
    x: Sequence[float], y: Sequence[float], reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """The probability that a run of ``x`` scores above a run of ``y`` on this task (ties count half), with a
    percentile interval from replicates that resample each side's runs apart (rliable's stratified bootstrap on
    one task). 0.5: no tendency either way."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    samples = [
        _improvement(x[rng.integers(0, len(x), len(x))], y[rng.integers(0, len(y), len(y))]) for _ in range(reps)
    ]
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return _improvement(x, y), float(low), float(high)


def welch_one_sided(a: np.ndarray, b: np.ndarray, margin: float = 0.0) -> float:
    """p-value of H0: mean(a) <= mean(b) + margin against mean(a) > mean(b) + margin."""
    from scipy import stats

    if np.var(a) == 0 and np.var(b) == 0:  # no spread: the difference is exact
        return 0.0 if a.mean() - b.mean() > margin else 1.0
    return float(stats.ttest_ind(a - margin, b, equal_var=False, alternative="greater").pvalue)


def paired_one_sided(a: np.ndarray, b: np.ndarray, margin: float = 0.0) -> float:
    """p-value of H0: mean(a_i - b_i) <= margin against > margin (paired t-test over seeds)."""
    from scipy import stats

    diff = a - b - margin
    if np.var(diff) == 0:  # every seed gave the same difference: it is exact
        return 0.0 if diff.mean() > 0 else 1.0
    return float(stats.ttest_1samp(diff, 0.0, alternative="greater").pvalue)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, confidence: float, resamples: int = 5000, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the mean paired difference a_i - b_i."""
    return bootstrap_ci(np.asarray(a) - np.asarray(b), confidence, resamples, seed)
