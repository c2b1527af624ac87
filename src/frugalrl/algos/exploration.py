"""DQN's exploration strategy: the epsilon schedule and the rule for the non-random actions.

``EpsilonSchedule`` decays epsilon linearly over ``exploration_fraction`` of the budget; after
that it is the hyper controller's exploration value when it has one, else the final value.
The action rule picks the non-random actions from Q: ``GreedyActions`` (argmax) or
``BoltzmannActions`` (sampled from softmax(Q / T), ``dqn.exploration: boltzmann``). A rule
with ``uses_entropy`` needs the learner's running entropy of softmax(Q) (through T); so may the
hyper controller. ``entropy_watch`` gives the learner a ``QEntropyWatch`` when anyone reads it
and an ``Unwatched`` (which measures nothing) when nobody does.
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


class QEntropyWatch:
    """Running (EMA 0.95) entropy of softmax(Q) on the acted states, normalised to [0, 1] by log A."""

    def __init__(self, value: float | None = None):
        self.value = value

    def observe(self, q: torch.Tensor) -> None:
        flat = torch.softmax(q, dim=-1)
        entropy = float(-(flat * flat.clamp_min(1e-12).log()).sum(-1).mean() / np.log(q.shape[-1]))
        self.value = entropy if self.value is None else 0.95 * self.value + 0.05 * entropy


class Unwatched:
    """Nobody reads the entropy: nothing is measured, the value stays None."""

    value: float | None = None

    def observe(self, q: torch.Tensor) -> None:
        return


def entropy_watch(*readers: object) -> QEntropyWatch | Unwatched:
    """A watch when any reader (action rule, hyper controller) has ``uses_entropy``."""
    return QEntropyWatch() if any(getattr(r, "uses_entropy", False) for r in readers) else Unwatched()


def build_action_rule(hp: DQNConfig) -> ActionRule:
    return BoltzmannActions() if hp.exploration == "boltzmann" else GreedyActions()
