"""The selection-signal comparison's envs, contenders and interval, shared by its script and the ledger.

``selection_signals`` runs every contender at one keep fraction and renders the section; the claims
ledger re-derives "the evaluator picks the samples that matter" from the same rows with the same
envs, budgets, contenders and eval-return interval.
"""

from __future__ import annotations

from frugalrl.stats import stratified_bootstrap_iqm

NAME = "selection_signals"
ENVS = {
    "LunarLander-v3": {"config": "lunarlander-ppo.yaml", "steps": 1_000_000, "pivot_refresh": 5},
    "BipedalWalker-v3": {"config": "bipedalwalker-ppo.yaml", "steps": 2_000_000, "pivot_refresh": 10},
}
SIGNALS = ("advantage_top", "advantage_proportional", "value_error", "clipped_ratio")
CONTENDERS = ("ppo", "random", "pivot", "pivot_grad", *SIGNALS)
SKIPPERS = CONTENDERS[1:]  # every contender at the keep fraction
MIN_SEEDS = 5  # paired seeds behind a verdict


def return_ci(returns: list[float]) -> tuple[float, float, float]:
    """(IQM, low, high): the eval-return IQM of a contender's seeds with its 95% stratified-bootstrap interval."""
    return stratified_bootstrap_iqm({"env": returns})
