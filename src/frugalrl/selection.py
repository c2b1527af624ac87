"""The ``SampleSelector`` seam: which samples of a rollout get a forward and backward pass.

PPO asks its selector once per update for the rollout (``on_rollout``) and then for the
update's minibatches in order (``plan``). A minibatch is a ``Selection``: the kept positions,
their loss weights, and the denominator of the weighted mean; the loss is
``sum(w_i * loss_i) / denominator``. Skipped samples never enter the forward pass, so they
cost nothing and get no gradient.

A selector that skips chooses over the rollout once per epoch; ``selection.packing`` says how
the chosen samples become minibatches:

- ``minibatch``: shuffle the rollout into minibatches as plain PPO does, then thin each one.
  The number of optimizer steps is unchanged, and at small network sizes an optimizer step,
  not a sample, is what costs time.
- ``epoch``: pack each epoch's chosen samples into full-size minibatches (``pack``).
- ``rollout``: pack the chosen samples of *all* epochs together, so a rollout that keeps 40%
  of its samples runs about 40% of the optimizer steps even when one minibatch holds the
  whole rollout (CartPole's RL Zoo settings).

A packed minibatch's denominator is scaled so that its expected loss equals the loss its
selection estimates. Selectors here: ``AllSamples`` (plain PPO), ``RandomSkip`` (control
(a): a uniform random subset) and ``FewerEpochs`` (control (b): fewer passes over the data,
the last one partial). The importance selector lives in ``frugalrl.pivot``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass
class RolloutBatch:
    """One update's rollout, flattened to B = T * N samples."""

    obs: torch.Tensor  # (B, *obs_shape)
    actions: torch.Tensor  # (B,) or (B, act_dim)
    logprobs: torch.Tensor  # (B,)
    dist_params: torch.Tensor  # (B, P)
    advantages: torch.Tensor  # (B,)
    returns: torch.Tensor  # (B,)


@dataclass
class Selection:
    indices: torch.Tensor  # (k,) positions into the rollout
    weights: torch.Tensor | None  # (k,) loss weights; None means all 1
    denominator: float  # the weighted loss is sum(w * loss) / denominator
    # Whose advantage statistics normalise this minibatch: positions into the rollout, or None
    # for the whole rollout's (statistics that do not depend on which samples were kept).
    norm_indices: torch.Tensor | None = None
    whole: bool = False  # indices are the whole rollout in order: the learner may skip gathering


class SampleSelector(Protocol):
    technique: str | None  # name reported in summary.json's techniques, None for plain

    def on_rollout(self, batch: RolloutBatch, step: int) -> None: ...

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        """This update's minibatches, in the order the optimizer takes them."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def shuffled_minibatches(rollout_size: int, batch_size: int, device: torch.device) -> list[torch.Tensor]:
    """Plain PPO's epoch: a random permutation of the rollout cut into minibatches."""
    order = torch.randperm(rollout_size, device=device)
    return [order[start : start + batch_size] for start in range(0, rollout_size, batch_size)]


def pack(chosen: Selection, batch_size: int) -> list[Selection]:
    """Shuffle kept samples and cut them into full-size minibatches.

    ``chosen`` estimates a mean loss as ``sum(w * loss) / N`` over its k samples. A random
    minibatch of m of them holds m / k of that sum on average, so its denominator is
    ``N * m / k``: every packed minibatch estimates the same loss as the whole selection.
    """
    k = len(chosen.indices)
    if k == 0:
        return []
    order = torch.randperm(k, device=chosen.indices.device)
    out = []
    for start in range(0, k, batch_size):
        part = order[start : start + batch_size]
        weights = None if chosen.weights is None else chosen.weights[part]
        out.append(Selection(chosen.indices[part], weights, chosen.denominator * len(part) / k, None))
    return out


def concat(selections: list[Selection]) -> Selection:
    """Several epochs' selections as one: their sums and denominators add up (for ``pack``)."""
    weights = [
        s.weights if s.weights is not None else torch.ones(len(s.indices), device=s.indices.device) for s in selections
    ]
    any_weights = any(s.weights is not None for s in selections)
    return Selection(
        torch.cat([s.indices for s in selections]),
        torch.cat(weights) if any_weights else None,
        sum(s.denominator for s in selections),
    )


def packed_plan(choose: Callable[[int], Selection], epochs: int, batch_size: int, packing: str) -> Iterator[Selection]:
    """Minibatches from a per-epoch choice ``choose(epoch)``, packed per epoch or over the whole rollout."""
    if packing == "rollout":
        yield from pack(concat([choose(e) for e in range(epochs)]), batch_size)
        return
    for e in range(epochs):
        yield from pack(choose(e), batch_size)


class _Stateless:
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        pass


class AllSamples(_Stateless):
    """Every sample, weight 1, each minibatch normalised by its own statistics: plain PPO."""

    technique = None
    device = torch.device("cpu")

    def __init__(self, device: torch.device | None = None):
        self.device = device or torch.device("cpu")

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        for _ in range(epochs):
            if batch_size >= rollout_size:  # one minibatch holds the rollout: nothing to shuffle or gather
                everything = torch.arange(rollout_size, device=self.device)
                yield Selection(everything, None, float(rollout_size), None, whole=True)
                continue
            for mb in shuffled_minibatches(rollout_size, batch_size, self.device):
                yield Selection(mb, None, float(len(mb)), mb)


class RandomSkip(_Stateless):
    """Control (a): keep a uniformly random ``keep_fraction``, computing less without choosing states."""

    technique = "random_skip"

    def __init__(self, keep_fraction: float, packing: str = "rollout", device: torch.device | None = None):
        self.keep_fraction = keep_fraction
        self.packing = packing
        self.device = device or torch.device("cpu")

    def _thin(self, indices: torch.Tensor) -> torch.Tensor:
        k = max(1, math.ceil(self.keep_fraction * len(indices)))
        return indices[torch.randperm(len(indices), device=indices.device)[:k]]

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        if self.packing == "minibatch":
            for _ in range(epochs):
                for mb in shuffled_minibatches(rollout_size, batch_size, self.device):
                    kept = self._thin(mb)
                    yield Selection(kept, None, float(len(kept)), mb)
            return

        def choose(epoch: int) -> Selection:
            kept = self._thin(torch.arange(rollout_size, device=self.device))
            return Selection(kept, None, float(len(kept)))

        yield from packed_plan(choose, epochs, batch_size, self.packing)


class FewerEpochs(_Stateless):
    """Control (b): ``keep_fraction`` of the update's sample passes as whole epochs, the last one partial.

    With E epochs the update computes ``keep_fraction * E * B`` samples: the first epochs in
    full, then a random part of one more epoch, in full-size minibatches, so it matches a
    packed selector on backward samples and (nearly) optimizer steps without rounding the
    epoch count.
    """

    technique = "fewer_epochs"

    def __init__(self, keep_fraction: float, device: torch.device | None = None):
        self.keep_fraction = keep_fraction
        self.device = device or torch.device("cpu")

    def plan(self, rollout_size: int, batch_size: int, epochs: int, step: int) -> Iterator[Selection]:
        budget = max(1, round(self.keep_fraction * epochs * rollout_size))
        for epoch in range(epochs):
            n = min(rollout_size, budget - epoch * rollout_size)
            if n <= 0:
                return
            kept = torch.randperm(rollout_size, device=self.device)[:n]
            yield from pack(Selection(kept, None, float(n)), batch_size)
