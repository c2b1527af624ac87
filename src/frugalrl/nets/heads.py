"""Action distributions written out by hand: a few tensor ops instead of
``torch.distributions`` objects, which cost more than a small policy's forward pass."""

from __future__ import annotations

import math

import torch
from torch import nn

from frugalrl.nets.torsos import orthogonal_init

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class CategoricalHead(nn.Module):
    """Discrete actions: logits -> sample, log-prob, entropy, mode."""

    def __init__(self, in_dim: int, num_actions: int):
        super().__init__()
        self.logits = orthogonal_init(nn.Linear(in_dim, num_actions), gain=0.01)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.logits(features), dim=-1)  # (B, A) log-probabilities

    @staticmethod
    def sample(log_probs: torch.Tensor) -> torch.Tensor:
        """Inverse-CDF sampling: one uniform per row (``torch.multinomial`` costs ~60 us a call on CPU)."""
        cdf = log_probs.exp().cumsum(-1)  # (B, A)
        u = torch.rand((len(cdf), 1), device=cdf.device) * cdf[:, -1:]  # scaled: rows may not sum to exactly 1
        return (cdf <= u).sum(-1).clamp_(max=cdf.shape[-1] - 1)  # (B,)

    @staticmethod
    def mode(log_probs: torch.Tensor) -> torch.Tensor:
        return log_probs.argmax(dim=-1)

    @staticmethod
    def log_prob(log_probs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    @staticmethod
    def entropy(log_probs: torch.Tensor) -> torch.Tensor:
        return -(log_probs.exp() * log_probs).sum(-1)


class GaussianHead(nn.Module):
    """Continuous actions: diagonal Gaussian with a state-independent learned log-std."""

    def __init__(self, in_dim: int, action_dim: int, log_std_init: float = 0.0):
        super().__init__()
        self.mean = orthogonal_init(nn.Linear(in_dim, action_dim), gain=0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), log_std_init))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        mean = self.mean(features)
        return torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)  # (B, 2 * act_dim)

    @staticmethod
    def _split(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = params.chunk(2, dim=-1)
        return mean, log_std

    def sample(self, params: torch.Tensor) -> torch.Tensor:
        mean, log_std = self._split(params)
        return mean + log_std.exp() * torch.randn_like(mean)

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        return self._split(params)[0]

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        mean, log_std = self._split(params)
        z = (actions - mean) / log_std.exp()
        return (-0.5 * z.pow(2) - log_std - _LOG_SQRT_2PI).sum(-1)

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        _, log_std = self._split(params)
        return (log_std + 0.5 + _LOG_SQRT_2PI).sum(-1)
