"""The ``SampleSelector`` seam: which samples of a minibatch get a forward and backward pass.

PPO asks its selector once per update (``on_rollout``, with the whole rollout) and once per
minibatch (``select``). A selection is the kept positions, their loss weights, and the
denominator of the weighted mean; the loss is ``sum(w_i * loss_i) / denominator``. Skipped
samples never enter the forward pass, so they cost nothing and get no gradient.

Selectors here: ``AllSamples`` (plain PPO) and ``RandomSkip`` (the control: a uniform random
subset of a fixed fraction). The importance selector lives in ``frugalrl.pivot``.
"""

from __future__ import annotations

import math
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


class SampleSelector(Protocol):
    technique: str | None  # name reported in summary.json's techniques, None for plain

    def on_rollout(self, batch: RolloutBatch, step: int) -> None: ...

    def select(self, indices: torch.Tensor, step: int) -> Selection: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class AllSamples:
    """Every sample, weight 1: plain PPO."""

    technique = None

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        pass

    def select(self, indices: torch.Tensor, step: int) -> Selection:
        return Selection(indices, None, float(len(indices)))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class RandomSkip:
    """Keep a uniformly random ``keep_fraction`` of each minibatch: compute cut without choosing states."""

    technique = "random_skip"

    def __init__(self, keep_fraction: float):
        self.keep_fraction = keep_fraction

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        pass

    def select(self, indices: torch.Tensor, step: int) -> Selection:
        k = max(1, math.ceil(self.keep_fraction * len(indices)))
        kept = indices[torch.randperm(len(indices), device=indices.device)[:k]]
        return Selection(kept, None, float(k))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
