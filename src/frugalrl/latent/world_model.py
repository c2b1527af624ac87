"""The latent world model: (z_t, a_t) -> (z_t+1, reward, termination).

An MLP on the latent and a one-hot action predicts the change of the latent (residual, so
"nothing moves" is the easy default), the reward's sign class (-, 0, +: the curriculum trains
on clipped rewards, as Atari PPO does) and the termination logit.
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

    def forward(self, latent: torch.Tensor, action: torch.Tensor) -> Prediction:
        onehot = F.one_hot(action.long(), self.num_actions).to(latent.dtype)
        h = self.body(torch.cat([latent, onehot], dim=-1))
        next_latent = (latent + self.delta(h)).clamp(-1.0, 1.0)
        return Prediction(next_latent, self.reward(h), self.done(h).squeeze(-1))

    def loss(
        self,
        latent: torch.Tensor,
        action: torch.Tensor,
        next_latent: torch.Tensor | None,
        reward: torch.Tensor,
        done: torch.Tensor,
    ) -> tuple[torch.Tensor, Prediction]:
        """Latent MSE (where a next latent exists) + reward cross-entropy + termination BCE."""
        pred = self(latent, action)
        loss = F.cross_entropy(pred.reward_logits, reward_class(reward))
        loss = loss + F.binary_cross_entropy_with_logits(pred.done_logit, done.float())
        if next_latent is not None:
            keep = ~done.bool()
            if keep.any():
                loss = loss + F.mse_loss(pred.next_latent[keep], next_latent[keep]) * self.latent_dim
        return loss, pred

    def spec(self) -> dict[str, Any]:
        return {"latent_dim": self.latent_dim, "num_actions": self.num_actions, "hidden": self.hidden}
