"""DQN's exploration strategy: the epsilon schedule and the rule for the non-random actions.

``EpsilonSchedule`` decays epsilon linearly over ``exploration_fraction`` of the budget; after
that it is the hyper controller's exploration value when it has one, else the final value.
The action rule picks the non-random actions from Q: ``GreedyActions`` (argmax) or
``BoltzmannActions`` (sampled from softmax(Q / T), ``dqn.exploration: boltzmann``). A rule
with ``uses_entropy`` needs the learner's running entropy of softmax(Q) (through T).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from frugalrl.config import DQNConfig


class EpsilonSchedule:
    def __init__(self, hp: DQNConfig):
        self.hp = hp  # read at every call: the config stays the one source of the schedule

    def __call__(self, global_step: int, settled: float | None) -> float:
        """Epsilon at ``global_step``; ``settled`` replaces the final value once the decay is over."""
        hp = self.hp
        span = hp.exploration_fraction * hp.total_timesteps
        progress = min(1.0, global_step / span)
        if progress >= 1.0 and settled is not None:
            return settled
        return hp.exploration_initial_eps + progress * (hp.exploration_final_eps - hp.exploration_initial_eps)


class ActionRule(Protocol):
    uses_entropy: bool

    def __call__(self, q: torch.Tensor, temperature: float, rng: np.random.Generator) -> np.ndarray:
        """Actions (N,) from Q values (N, A), before epsilon's random actions replace some."""


class GreedyActions:
    uses_entropy = False

    def __call__(self, q: torch.Tensor, temperature: float, rng: np.random.Generator) -> np.ndarray:
        return q.argmax(-1).cpu().numpy()


class BoltzmannActions:
    uses_entropy = True  # the temperature follows the entropy of softmax(Q)

    def __call__(self, q: torch.Tensor, temperature: float, rng: np.random.Generator) -> np.ndarray:
        probs = torch.softmax(q / temperature, dim=-1)
        cumulative = probs.cumsum(-1).cpu().numpy()
        draws = rng.random((q.shape[0], 1))
        return np.minimum((draws > cumulative).sum(-1), q.shape[-1] - 1)


def build_action_rule(hp: DQNConfig) -> ActionRule:
    return BoltzmannActions() if hp.exploration == "boltzmann" else GreedyActions()
