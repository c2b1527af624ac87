"""The learner a config names: PPO, DQN or SAC, with its technique objects plugged in.

This is the learner of the ``real`` rollout source (``frugalrl.rollouts``). The ``latent`` source
builds the latent curriculum's own (``frugalrl.latent.train.latent_learner``): it needs pretrained
models and two envs first.
"""

from __future__ import annotations

from typing import Any

import torch

from frugalrl.algos.base import Learner
from frugalrl.algos.dqn import DQN
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.ppo import PPO
from frugalrl.algos.sac import SAC
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.selection import SampleSelector
from frugalrl.selectors import SELECTORS, SelectorContext


def build_selector(config: ExperimentConfig, agent: PPO, meter: CostMeter, device: torch.device) -> SampleSelector:
    """The ``SampleSelector`` registered under ``selection.kind`` (``frugalrl.selectors``)."""
    settings = SELECTORS.settings_for(config.selection.kind, config.selection.settings)
    context = SelectorContext(config, settings, agent.policy, agent.env.single_observation_space, meter, device)
    return SELECTORS.entry(config.selection.kind).factory(context)


def build_learner(
    config: ExperimentConfig,
    env: Any,
    meter: CostMeter,
    device: torch.device,
    gradient_sync: GradientSync = LOCAL_SYNC,
) -> Learner:
    """The learner ``config.algo`` names, with its technique objects plugged in."""
    if config.algo == "dqn":
        return DQN(config, env, meter, device, gradient_sync=gradient_sync)
    if config.algo == "sac":
        return SAC(config, env, meter, device, gradient_sync=gradient_sync)
    agent = PPO(config, env, meter, device, gradient_sync=gradient_sync)
    agent.selector = build_selector(config, agent, meter, device)
    return agent
