"""The dynamic sampling scheduler: PivotRL's importance-based ``SampleSelector`` for PPO.

Per sample, with its score s in [0, 1] and thresholds low <= high (``selection.settings.score: rank``, the
default, ranks the evaluator's outputs within the rollout first, so s is a quantile):

- s >= high: full forward and backward pass, weight 1;
- low <= s < high: kept with probability ``keep_prob``, weight 1 / keep_prob;
- s < low: kept with probability ``p_min``, weight 1 / p_min (``p_min: 0``: skipped).

With ``p_min > 0`` every sample has a known chance of being kept and is weighted by its
inverse (Horvitz-Thompson), so the weighted loss over the kept samples, divided by the number
of *all* samples, is an unbiased estimate of the full-batch loss: its expected gradient is
the full gradient. With ``p_min = 0`` (the rule as first built) the low band never counts and
the loss estimates the mean over the other samples only: a gradient biased towards
high-score states. The rule is drawn afresh for every epoch over the whole rollout and the
kept samples are packed into full minibatches (``selection.packing: rollout`` or ``epoch``,
fewer optimizer steps), or it thins each of plain PPO's minibatches (``minibatch``). Around
that rule:

- warm-up: the first ``warmup_steps`` env steps compute every sample, while the evaluator
  learns from each rollout;
- safety margin: at least ``min_full_fraction`` of the samples chosen from get full compute (the
  highest-scored samples are promoted when too few pass ``high``; with rank scores this only
  binds when ``high`` is above ``1 - min_full_fraction``);
- dynamic threshold: ``low`` starts ``threshold_boost`` higher and decays linearly to its base
  over ``threshold_decay_steps`` (the seed's ``dynamic_threshold``);
- refresh: every ``refresh_every_updates`` updates the evaluator is fine-tuned on fresh labels
  from the current rollout, so it follows the policy as it changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from frugalrl.config import PivotConfig
from frugalrl.cost import CostMeter
from frugalrl.nets.policy import ActorCritic
from frugalrl.pivot.evaluator import ImportanceEvaluator
from frugalrl.pivot.labels import compute_labels, rank_normalize
from frugalrl.selection import RolloutBatch, Selection, pack, shuffled_minibatches


def fit_evaluator(
    evaluator: ImportanceEvaluator,
    optimizer: torch.optim.Optimizer,
    obs: torch.Tensor,
    targets: torch.Tensor,
    epochs: int,
    batch_size: int,
    meter: CostMeter | None = None,
) -> float:
    """Regress the evaluator's scores on rank targets in [0, 1] (MSE); returns the last epoch's loss."""
    n = obs.shape[0]
    last = 0.0
    for _ in range(epochs):
        order = torch.randperm(n, device=obs.device)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]

            def step(i: torch.Tensor = idx) -> torch.Tensor:
                loss = torch.nn.functional.mse_loss(evaluator(obs[i]), targets[i])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                return loss.detach()

            loss = meter.run_counted("evaluator_train", step, len(idx)) if meter else step()
            if meter:
                meter.count("evaluator_train", len(idx))
            total += float(loss) * len(idx)
        last = total / n
    return last


class ImportanceSelector:
    """PivotRL's selector: scores each rollout once, then keeps samples by the threshold rule."""

    technique = "pivot"

    def __init__(
        self,
        config: PivotConfig,
        evaluator: ImportanceEvaluator,
        policy: ActorCritic,
        meter: CostMeter,
        device: torch.device,
        packing: str = "rollout",
    ):
        self.config = config
        self.device = device
        self.packing = packing
        self.evaluator = evaluator.to(device)
        self.optimizer = torch.optim.Adam(self.evaluator.parameters(), lr=config.evaluator.learning_rate)
        self.policy = policy
        self.meter = meter
        self.scores: torch.Tensor | None = None
        self.updates_seen = 0
        self.last_fit_loss = float("nan")
        self._kept = 0
        self._seen = 0

    def thresholds(self, step: int) -> tuple[float, float]:
        """(low, high) at env step ``step``: low decays from low + boost to low."""
        cfg = self.config
        low = cfg.low + cfg.threshold_boost * max(0.0, 1.0 - step / cfg.threshold_decay_steps)
        return min(low, cfg.high), cfg.high

    def in_warmup(self, step: int) -> bool:
        return step < self.config.warmup_steps

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        cfg = self.config
        every = cfg.refresh_every_updates
        if self.in_warmup(step) or (every and self.updates_seen % every == 0):
            self.refresh(batch)
        self.updates_seen += 1
        if self.in_warmup(step):
            self.scores = None
            return
        with torch.no_grad():
            raw = self.meter.run_counted("evaluator_score", lambda: self.evaluator(batch.obs), len(batch.obs))
        self.meter.count("evaluator_score", len(batch.obs))
        # "rank": the thresholds read as quantiles of this rollout's scores, whatever the evaluator's
        # calibration (a transferred evaluator's raw scores can all sit below ``high``).
        self.scores = rank_normalize(raw) if cfg.score == "rank" else raw

    def refresh(self, batch: RolloutBatch) -> None:
        """Fine-tune the evaluator on this rollout's labels (rank-normalised)."""
        kind = self.config.label
        raw = self.meter.run_counted(
            "label",
            lambda: compute_labels(kind, self.policy, batch.obs, batch.actions, batch.advantages, batch.dist_params),
            len(batch.obs),
        )
        if kind == "grad_norm":  # the only label that costs network passes
            self.meter.count("label", len(batch.obs))
        targets = rank_normalize(raw.detach())
        ev = self.config.evaluator
        self.last_fit_loss = fit_evaluator(
            self.evaluator, self.optimizer, batch.obs, targets, self.config.refresh_epochs, ev.batch_size, self.meter
        )

    def choose(self, indices: torch.Tensor, step: int, draws: int = 1) -> Selection:
        """The threshold rule on ``indices``, drawn ``draws`` times (epochs) at once: kept positions
        (repeats across draws), weights and the loss denominator of all draws together."""
        m = len(indices)
        self._seen += m * draws
        if self.scores is None or self.in_warmup(step):
            self._kept += m * draws
            everything = indices.repeat(draws)
            return Selection(everything, None, float(m * draws), indices if draws == 1 else None)
        cfg = self.config
        scores = self.scores[indices]
        low, high = self.thresholds(step)
        full = scores >= high
        need = math.ceil(cfg.min_full_fraction * m)
        if int(full.sum()) < need:  # safety margin: promote the highest-scored samples
            full[scores.topk(need).indices] = True
        middle = ~full & (scores >= low)
        weights = torch.where(full, 1.0, 1.0 / cfg.keep_prob)
        # Probability of being kept: 1, keep_prob, or p_min (0: the low band never counts).
        keep_prob = torch.where(full, 1.0, torch.where(middle, cfg.keep_prob, cfg.p_min))
        if cfg.p_min > 0:  # unbiased: the low band too, with inverse-probability weights
            weights = torch.where(full | middle, weights, 1.0 / cfg.p_min)
            population = m  # estimates the mean loss over every sample
        else:  # the biased rule: the mean over the full and middle bands only
            population = int(full.sum() + middle.sum())
        keep = torch.rand((draws, m), device=indices.device) < keep_prob  # (draws, m)
        rows, cols = keep.nonzero(as_tuple=True)
        self._kept += len(cols)
        norm = indices if draws == 1 else None
        return Selection(indices[cols], weights[cols], float(population * draws), norm)

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        if self.packing == "minibatch":
            for _ in range(epochs):
                for mb in shuffled_minibatches(rollout_size, batch_size, self.device):
                    yield self.choose(mb, step)
            return
        everything = torch.arange(rollout_size, device=self.device)
        if self.packing == "rollout":  # every epoch's draw at once, packed together
            yield from pack(self.choose(everything, step, draws=epochs), batch_size)
            return
        for _ in range(epochs):
            yield from pack(self.choose(everything, step), batch_size)

    def metrics(self) -> dict[str, float]:
        """Kept fraction since the last call, evaluator fit loss."""
        kept = self._kept / self._seen if self._seen else 1.0
        self._kept = self._seen = 0
        return {"pivot_kept_fraction": kept, "pivot_evaluator_loss": self.last_fit_loss}

    def state_dict(self) -> dict[str, Any]:
        return {
            "evaluator": self.evaluator.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates_seen": self.updates_seen,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evaluator.load_state_dict(state["evaluator"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates_seen = int(state["updates_seen"])
