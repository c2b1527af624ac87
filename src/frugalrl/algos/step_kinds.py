"""Which ``PPOStep`` a run gets (``ppo.compile``): the eager, fused or inductor kind, with a clean fallback.

Apart from ``ppo_step`` so that the fused kind, which builds on ``ppo_step``'s types, can be imported
here at module level without an import cycle.
"""

from __future__ import annotations

import logging

import torch

from frugalrl.algos.fused_mlp import FusedMLPStep, fused_unsupported
from frugalrl.algos.ppo_step import EagerStep, InductorStep, PPOStep, inductor_available
from frugalrl.config import PPOConfig
from frugalrl.nets.policy import ActorCritic

log = logging.getLogger("frugalrl.algos.ppo_step")  # the logger these fallbacks always wrote to


def make_step(mode: str, policy: ActorCritic, hp: PPOConfig, device: torch.device) -> PPOStep:
    """The step ``ppo.compile`` asks for, with a clean fallback and one log line when it cannot be had."""
    if mode == "off":
        return EagerStep(policy, hp)
    if mode == "auto" and device.type != "cpu":
        return EagerStep(policy, hp)
    if mode in ("fused", "auto"):
        why = fused_unsupported(policy)
        if why is None:
            return FusedMLPStep(policy, hp)
        if mode == "fused":
            log.warning("ppo.compile = fused is not possible here (%s); using the eager step", why)
        return EagerStep(policy, hp)
    why = inductor_available()  # mode == "inductor"
    if why is not None:
        log.warning("ppo.compile = inductor is not possible here (%s); using the eager step", why)
        return EagerStep(policy, hp)
    return InductorStep(policy, hp)
