"""The promotion gate: a challenger replaces the champion only with statistical support.

Both policies are evaluated on the same episode seeds (episode i from ``eval.seed + i``), so the
returns pair up. Two tests, chosen in ``promotion.test``:

- ``welch`` (the t-test): when both evaluations ran on the same seeds and ``pair_seeds`` is on
  (the default), a one-sided paired t-test on the per-seed differences; otherwise Welch's
  t-test of challenger mean > champion mean + ``min_improvement``. Promote when p < ``alpha``.
  Pairing removes the seed-to-seed spread both policies share, so it needs fewer episodes for
  the same power; the decision names the test that ran.
- ``bootstrap``: paired bootstrap of the mean difference (challenger_i - champion_i); promote
  when the lower end of the (1 - 2 alpha) interval is above ``min_improvement``.

A first version (no champion yet) faces the same test against the task's random policy on the
same seeds, when those returns are given: a policy that does nothing never becomes champion.

The decision carries its evidence (means, difference, p-value or interval, sample sizes, the
test and thresholds), which goes to the registry as tags, to MLflow and into the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from frugalrl.config import PromotionConfig
from frugalrl.stats import paired_bootstrap, paired_one_sided, welch_one_sided


@dataclass
class GateDecision:
    promoted: bool
    reason: str
    test: str
    challenger_mean: float
    champion_mean: float | None
    difference: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    n_challenger: int
    n_champion: int
    against: str = "champion"  # what the challenger was compared with: "champion" or "random policy"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    challenger: list[float],
    champion: list[float] | None,
    config: PromotionConfig,
    random_returns: list[float] | None = None,
) -> GateDecision:
    """Whether ``challenger``'s evaluation returns beat ``champion``'s with support.

    ``champion`` None: the first version. It is tested against ``random_returns`` (the random
    policy on the same seeds) when given, and promoted unconditionally only when they are not.
    """
    a = np.asarray(challenger, dtype=np.float64)
    base = {"test": config.test, "challenger_mean": float(a.mean()), "n_challenger": len(a)}
    if champion is None and random_returns is None:
        return GateDecision(True, "first model: no champion yet", champion_mean=None, difference=None,
                            p_value=None, ci_low=None, ci_high=None, n_champion=0, **base)  # fmt: skip
    against = "champion" if champion is not None else "random policy"
    b = np.asarray(champion if champion is not None else random_returns, dtype=np.float64)
    decision = _compare(a, b, config, base)
    decision.against = against
    if champion is None:
        verdict = "beats" if decision.promoted else "does not beat"
        decision.reason = f"first model {verdict} the random policy (mean {b.mean():.2f}) on the same seeds: " + (
            decision.reason
        )
    return decision


def _compare(a: np.ndarray, b: np.ndarray, config: PromotionConfig, base: dict[str, Any]) -> GateDecision:
    diff = float(a.mean() - b.mean())
    evidence = {"champion_mean": float(b.mean()), "difference": diff, "n_champion": len(b)}
    if len(a) < config.min_episodes or len(b) < config.min_episodes:
        return GateDecision(False, f"fewer than {config.min_episodes} evaluation episodes: no statistical support",
                            p_value=None, ci_low=None, ci_high=None, **evidence, **base)  # fmt: skip
    if config.test == "bootstrap":
        if len(a) != len(b):
            return GateDecision(False, "bootstrap pairs episodes: the two evaluations differ in length",
                                p_value=None, ci_low=None, ci_high=None, **evidence, **base)  # fmt: skip
        low, high = paired_bootstrap(a, b, 1 - 2 * config.alpha)
        promoted = low > config.min_improvement
        verdict = "above" if promoted else "not above"
        reason = (f"paired bootstrap: mean difference {diff:+.2f}, {100 * (1 - 2 * config.alpha):.0f}% interval "
                  f"[{low:+.2f}, {high:+.2f}] {verdict} {config.min_improvement:+.2f}")  # fmt: skip
        return GateDecision(promoted, reason, p_value=None, ci_low=low, ci_high=high, **evidence, **base)
    paired = config.pair_seeds and len(a) == len(b)  # the gate only compares evaluations on the same seeds
    if paired:
        p, name = paired_one_sided(a, b, config.min_improvement), "paired t-test over seeds"
    else:
        p, name = welch_one_sided(a, b, config.min_improvement), "Welch t-test"
    promoted = p < config.alpha
    reason = (f"{name}: mean difference {diff:+.2f}, one-sided p = {p:.4f} "
              f"{'<' if promoted else '>='} alpha {config.alpha}")  # fmt: skip
    base = {**base, "test": "paired" if paired else "welch"}
    return GateDecision(promoted, reason, p_value=p, ci_low=None, ci_high=None, **evidence, **base)
