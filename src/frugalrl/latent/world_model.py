"""The latent world model: (z_t, a_t) -> (z_t+1, reward, termination).

An MLP on the latent and a one-hot action predicts the change of the latent (residual, so
"nothing moves" is the easy default), the reward's sign class (-, 0, +: the curriculum trains
on clipped rewards, as Atari PPO does) and the termination logit.

Rewards and game ends are rare (a Breakout point every few dozen steps of random play, a lost
life every few hundred), so an unweighted loss teaches the heads to say "nothing happens" and an
argmax never imagines a reward. The heads are trained class-balanced instead (each class weighted
by the inverse of its frequency in the data seen so far, kept in the ``*_counts`` buffers), which
makes them learn the balanced probabilities ``p(y|x) / p(y)`` (up to normalisation); dividing by the
class weights again (``reward_probs``, ``done_prob``: the logits minus ``log w(y)``) gives back
calibrated probabilities, from which the virtual env imagines (expected reward, sampled ends). The
weights, not the prior: a class rarer than 1 in ``2 * MAX_CLASS_WEIGHT`` steps (a game end in Boxing
or Pong, a point Pong's random play wins) has its weight capped, and correcting by its prior would
divide its probability by the cap's shortfall (9x for Boxing's game ends).

The frozen latents are small numbers (a per-dimension spread of 0.02-0.1 on the shared Atari
encoder) beside a one-hot action of 1, and an MLP fed them raw ranks rewarded steps no better than
chance (held-out reward AUC 0.49-0.53 on Breakout, Pong and Boxing, where boosted trees on the
same latents reach 0.84 and 0.97 on the first two: docs/latent.md). So the body sees each latent
dimension standardised by running statistics of the latents it was trained on (``latent_mean``,
``latent_var``, updated in ``loss`` like the class counts), predicts the change in those units,
and the latent loss is measured in them too. A file saved before the statistics loads as mean 0,
variance 1 (the raw latent, as it was trained) until it is trained again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

REWARD_CLASSES = torch.tensor([-1.0, 0.0, 1.0])


class Prediction(NamedTuple):
    next_latent: torch.Tensor  # (B, D) in [-1, 1]
    reward_logits: torch.Tensor  # (B, 3) over REWARD_CLASSES
    done_logit: torch.Tensor  # (B,)


def reward_class(reward: torch.Tensor) -> torch.Tensor:
    """Raw rewards -> class index 0 (negative), 1 (zero), 2 (positive)."""
    return (torch.sign(reward) + 1).long()


MAX_CLASS_WEIGHT = 100.0  # a class seen once in 10,000 steps is not weighted 10,000 times
# The latent statistics: a plain running average over the first batches, then an exponential one
# (the latents move while the encoder trains jointly with the model); a floor on the spread keeps a
# dimension that never moves from being blown up.
LATENT_STATS_MOMENTUM = 0.01
MIN_LATENT_STD = 1e-3


class LatentWorldModel(nn.Module):
    def __init__(self, latent_dim: int, num_actions: int, hidden: list[int]):
        super().__init__()
        self.latent_dim, self.num_actions, self.hidden = latent_dim, num_actions, list(hidden)
        layers: list[nn.Module] = []
        width = latent_dim + num_actions
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ELU()]
            width = size
        self.body = nn.Sequential(*layers)
        self.delta = nn.Linear(width, latent_dim)
        self.reward = nn.Linear(width, len(REWARD_CLASSES))
        self.done = nn.Linear(width, 1)
        nn.init.zeros_(self.delta.weight)  # start as "the latent stays"
        nn.init.zeros_(self.delta.bias)
        # How often each reward class and each termination outcome occurred in the training data:
        # the class weights of the loss and the prior that turns balanced scores into probabilities.
        # Ones: no data yet, a uniform prior (and files saved before the counts load as that).
        self.register_buffer("reward_counts", torch.ones(len(REWARD_CLASSES)))
        self.register_buffer("done_counts", torch.ones(2))
        # The latents' running mean and variance (samples seen so far in ``latent_seen``); before any
        # training: mean 0, variance 1, so an untrained or older model sees the raw latent.
        self.register_buffer("latent_mean", torch.zeros(latent_dim))
        self.register_buffer("latent_var", torch.ones(latent_dim))
        self.register_buffer("latent_seen", torch.zeros(()))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        # files saved before the counts or the latent statistics existed: the defaults they were trained with
        for name in ("reward_counts", "done_counts", "latent_var"):
            state_dict.setdefault(prefix + name, torch.ones_like(getattr(self, name)))
        for name in ("latent_mean", "latent_seen"):
            state_dict.setdefault(prefix + name, torch.zeros_like(getattr(self, name)))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def latent_scale(self) -> torch.Tensor:
        """(D,) the spread each latent dimension is measured in."""
        return self.latent_var.sqrt().clamp(min=MIN_LATENT_STD)

    def latent_error(self, predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared latent error in standardised units (what the model's latent loss minimises)."""
        return (((predicted - target) / self.latent_scale()) ** 2).mean()

    @torch.no_grad()
    def _track_latents(self, latent: torch.Tensor) -> None:
        batch = latent.detach().reshape(-1, self.latent_dim).to(self.latent_mean)
        weight = max(len(batch) / float(self.latent_seen + len(batch)), LATENT_STATS_MOMENTUM)
        self.latent_mean.lerp_(batch.mean(0), weight)
        self.latent_var.lerp_(batch.var(0, unbiased=False), weight)
        self.latent_seen += len(batch)

    def _prior(self, counts: torch.Tensor) -> torch.Tensor:
        return counts / counts.sum()

    def reward_probs(self, pred: Prediction) -> torch.Tensor:
        """(B, 3) calibrated probabilities of REWARD_CLASSES: the weighted head's odds divided by the class
        weights it was trained with (the class prior where no weight is capped)."""
        return torch.softmax(pred.reward_logits - self._class_weights(self.reward_counts).log(), dim=-1)

    def expected_reward(self, pred: Prediction) -> torch.Tensor:
        return self.reward_probs(pred) @ REWARD_CLASSES.to(pred.reward_logits.dtype)

    def done_prob(self, pred: Prediction) -> torch.Tensor:
        """(B,) calibrated probability that the step ends the episode (a lost life, in training data)."""
        weights = self._class_weights(self.done_counts)
        return torch.sigmoid(pred.done_logit - (weights[1] / weights[0]).log())

    def _class_weights(self, counts: torch.Tensor) -> torch.Tensor:
        weights = 1.0 / (len(counts) * self._prior(counts))
        return weights.clamp(max=MAX_CLASS_WEIGHT)

    def forward(self, latent: torch.Tensor, action: torch.Tensor) -> Prediction:
        onehot = F.one_hot(action.long(), self.num_actions).to(latent.dtype)
        scale = self.latent_scale().to(latent.dtype)
        h = self.body(torch.cat([(latent - self.latent_mean.to(latent.dtype)) / scale, onehot], dim=-1))
        next_latent = (latent + self.delta(h) * scale).clamp(-1.0, 1.0)
        return Prediction(next_latent, self.reward(h), self.done(h).squeeze(-1))

    def loss(
        self,
        latent: torch.Tensor,
        action: torch.Tensor,
        next_latent: torch.Tensor | None,
        reward: torch.Tensor,
        done: torch.Tensor,
    ) -> tuple[torch.Tensor, Prediction]:
        """Latent MSE in standardised units (where a next latent exists) + class-balanced reward
        cross-entropy + balanced termination BCE; the batch's latents and classes are added to the
        running statistics and counts first."""
        self._track_latents(latent)
        pred = self(latent, action)
        target = reward_class(reward)
        with torch.no_grad():
            self.reward_counts += torch.bincount(target, minlength=len(REWARD_CLASSES)).to(self.reward_counts)
            ended = done.bool()
            self.done_counts += torch.stack([(~ended).sum(), ended.sum()]).to(self.done_counts)
        weights = self._class_weights(self.reward_counts).to(pred.reward_logits.dtype)
        loss = F.cross_entropy(pred.reward_logits, target, weight=weights)
        done_weights = self._class_weights(self.done_counts)
        per_step = torch.where(ended, done_weights[1], done_weights[0]).to(pred.done_logit.dtype)
        bce = F.binary_cross_entropy_with_logits(pred.done_logit, done.float(), reduction="none")
        loss = loss + (bce * per_step).sum() / per_step.sum()
        if next_latent is not None:
            keep = ~done.bool()
            if keep.any():
                loss = loss + self.latent_error(pred.next_latent[keep], next_latent[keep])
        return loss, pred

    def spec(self) -> dict[str, Any]:
        return {"latent_dim": self.latent_dim, "num_actions": self.num_actions, "hidden": self.hidden}
