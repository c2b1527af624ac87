"""What every free-signal selector shares: a keep fraction, one choice per epoch, packing.

A signal selector keeps exactly as many samples as random skipping of the same ``keep_fraction``
(``max(1, ceil(keep_fraction * n))`` of every n chosen from), so a comparison with ``random`` is at
equal backward samples and optimizer steps; only *which* samples differ. Each epoch's choice is made
when the optimizer reaches that epoch (``plan`` is a generator that PPO consumes minibatch by
minibatch), so a signal that rescores the rollout with the current policy sees the parameters the
earlier epochs left:

- ``minibatch`` packing: PPO's shuffled minibatches, each thinned (as many optimizer steps as PPO);
- ``epoch``: each epoch's kept samples shuffled and packed into full minibatches (``selection.pack``);
- ``rollout``: the epochs' kept samples streamed into full minibatches one epoch after the other, a
  minibatch straddling two epochs where one ends part way (``stream_pack``). That is as many optimizer
  steps as random skipping's rollout packing (``ceil(epochs * kept / batch_size)``); unlike it, a
  minibatch mixes at most two epochs, since a later epoch is chosen only once the policy got there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from frugalrl.cost import INFERENCE, CostMeter
from frugalrl.nets.policy import ActorCritic
from frugalrl.selection import RolloutBatch, Selection, pack, shuffled_minibatches

SIGNAL_PHASE = "signal_forward"  # the cost meter's phase of a signal's own forward passes


def kept_count(keep_fraction: float, n: int) -> int:
    """How many of ``n`` samples a selector of ``keep_fraction`` keeps: the same rule as ``RandomSkip``."""
    return max(1, math.ceil(keep_fraction * n))


def stream_pack(choose: Callable[[int], Selection], epochs: int, batch_size: int) -> Iterator[Selection]:
    """Full-size minibatches of every epoch's choice, ``choose(epoch)`` called only when the stream needs it.

    A selection of k samples with denominator D estimates a mean loss as ``sum(w * loss) / D``; each of its
    samples carries ``D / k`` of the denominator, so a minibatch's denominator is the sum of its samples'
    shares and every minibatch estimates the loss its samples' selections estimate (as ``pack`` does)."""
    indices: list[torch.Tensor] = []
    weights: list[torch.Tensor] = []
    shares: list[torch.Tensor] = []
    any_weights = False
    held = 0
    for epoch in range(epochs):
        chosen = choose(epoch)
        k = len(chosen.indices)
        if k == 0:
            continue
        order = torch.randperm(k, device=chosen.indices.device)
        indices.append(chosen.indices[order])
        any_weights |= chosen.weights is not None
        ones = torch.ones(k, device=chosen.indices.device)
        weights.append(ones if chosen.weights is None else chosen.weights[order])
        shares.append(ones * (chosen.denominator / k))
        held += k
        while held >= batch_size:
            idx, w, s = (torch.cat(parts) for parts in (indices, weights, shares))
            yield Selection(idx[:batch_size], w[:batch_size] if any_weights else None, float(s[:batch_size].sum()))
            indices, weights, shares = [idx[batch_size:]], [w[batch_size:]], [s[batch_size:]]
            held -= batch_size
    if held:  # the last, short minibatch
        idx, w, s = (torch.cat(parts) for parts in (indices, weights, shares))
        yield Selection(idx, w if any_weights else None, float(s.sum()))


class SignalSkip:
    """A skipping rule by a per-sample signal: subclasses say how a rollout is scored (``epoch_scores``) and
    which samples of a set are kept (``keep``); this class plans the minibatches and meters the signal."""

    technique: str | None = None

    def __init__(
        self,
        keep_fraction: float,
        policy: ActorCritic,
        meter: CostMeter,
        packing: str = "rollout",
        norm_adv: bool = True,
        device: torch.device | None = None,
    ):
        self.keep_fraction = keep_fraction
        self.policy = policy
        self.meter = meter
        self.packing = packing
        self.norm_adv = norm_adv  # the loss sees (A - mean) / std: a signal of the advantage reads that
        self.device = device or torch.device("cpu")
        self.batch: RolloutBatch | None = None
        self.step = 0

    # ------------------------------------------------------------------ what a subclass says
    def epoch_scores(self, epoch: int) -> torch.Tensor:
        """The signal over the rollout, (B,), for the choice of epoch ``epoch`` (0 is the update's first)."""
        raise NotImplementedError

    def keep(self, indices: torch.Tensor, scores: torch.Tensor) -> Selection:
        """The kept part of ``indices`` (their scores ``scores``): ``kept_count`` samples and their weights."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def loss_advantages(self) -> torch.Tensor:
        """The advantages as packed minibatches' loss sees them up to scale: centred on the rollout's mean
        when ``ppo.norm_adv`` (a thinned minibatch is normalised by its own statistics, whose mean is close)."""
        adv = self.batch.advantages
        return adv - adv.mean() if self.norm_adv and len(adv) > 1 else adv

    @torch.no_grad()
    def current_policy(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-prob of the rollout's actions, value) under the policy as it is now: one forward over the
        rollout, metered as this signal's own cost (``signal_forward``, scoring work, like an evaluator's)."""
        n = len(self.batch.obs)
        logprob, _, value = self.meter.run_counted(
            SIGNAL_PHASE, lambda: self.policy.evaluate(self.batch.obs, self.batch.actions), n
        )
        self.meter.count(SIGNAL_PHASE, n, kind=INFERENCE)
        return logprob, value

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        self.batch, self.step = batch, step

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        everything = torch.arange(rollout_size, device=self.device)
        if self.packing == "minibatch":
            for epoch in range(epochs):
                scores = self.epoch_scores(epoch)
                for mb in shuffled_minibatches(rollout_size, batch_size, self.device):
                    chosen = self.keep(mb, scores[mb])
                    yield Selection(chosen.indices, chosen.weights, chosen.denominator, mb)
            return

        def choose(epoch: int) -> Selection:
            return self.keep(everything, self.epoch_scores(epoch))

        if self.packing == "epoch":
            for epoch in range(epochs):
                yield from pack(choose(epoch), batch_size)
            return
        yield from stream_pack(choose, epochs, batch_size)

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}  # each choice is drawn from torch's RNG, which the checkpoint keeps

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def top_k(indices: torch.Tensor, scores: torch.Tensor, k: int) -> Selection:
    """The ``k`` samples of ``indices`` with the highest ``scores``, weight 1, a plain mean over them."""
    kept = indices[torch.topk(scores, k).indices]
    return Selection(kept, None, float(k))
