"""PPO step kinds by name: ``ppo.compile`` picks the ``PPOStep`` a run gets.

Each module of this package registers the kinds it defines (``builtin``: off, fused, inductor and
auto, which picks fused or off). A factory gets a ``StepContext`` and returns a ``PPOStep``; a kind
that cannot run here falls back to another kind itself, with one log line, so a config that asks
for it still trains. A new kind is one new module here; see docs/architecture.md, "Adding a technique".

The registry lives apart from ``ppo_step`` so that the fused kind, which builds on ``ppo_step``'s
types, can be imported by ``builtin`` at module level without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frugalrl.plugins import Registry

if TYPE_CHECKING:
    import torch

    from frugalrl.algos.ppo_step import PPOStep
    from frugalrl.config import PPOConfig
    from frugalrl.nets.policy import ActorCritic


@dataclass(frozen=True)
class StepContext:
    """What a step factory gets: the policy (after any surgery), PPO's hyperparameters, the device."""

    policy: ActorCritic
    hp: PPOConfig
    device: torch.device


StepFactory = Callable[[StepContext], "PPOStep"]
STEP_KINDS: Registry[StepFactory] = Registry("PPO step kind", "ppo", "frugalrl.algos.step_kinds")


def make_step(kind: str, policy: ActorCritic, hp: PPOConfig, device: torch.device) -> PPOStep:
    """The step registered under ``kind`` (``ppo.compile``), built for this policy and device."""
    return STEP_KINDS.entry(kind).factory(StepContext(policy, hp, device))
