"""Rebuild a saved policy's networks from its config: a small registry of builders, one per kind.

A ``policy.pt`` carries the config that made it. ``build_policy`` runs the builders of the
kinds that config names (``policy_kinds``), in order: the input stage (``latent``: the frame
encoder the policy acts through), the network of its algorithm (``ppo``, ``dqn``, ``sac``), then
a fine-tuned policy's ``adapter``. The module that owns a kind registers it with
``register_builder``. PEFT registers ``adapter`` when ``frugalrl.peft.store`` is imported, and
that module imports the policy loader; so the registry imports it by name on first need
(``_OWNERS``) and the loader never imports PEFT.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from frugalrl.algos.sac import build_sac_actor
from frugalrl.config import ExperimentConfig
from frugalrl.errors import CheckpointError
from frugalrl.latent.encoder import FrameEncoder
from frugalrl.latent.envs import latent_space
from frugalrl.nets.policy import InputStandardiser, build_actor_critic
from frugalrl.nets.qnet import build_q_network


@dataclass
class PolicyParts:
    """What the builders fill in: the network, the encoder a latent policy acts through, and the
    standardisation of the network's input where the policy was trained with one."""

    config: ExperimentConfig
    obs_space: Any
    act_space: Any
    network: nn.Module | None = None
    encoder: nn.Module | None = None
    input_norm: InputStandardiser | None = None


Builder = Callable[[PolicyParts], None]
_BUILDERS: dict[str, Builder] = {}
_OWNERS = {"adapter": "frugalrl.peft.store"}  # kinds registered by a module that imports the loader


def register_builder(kind: str, builder: Builder) -> None:
    """Make ``builder`` the one that builds ``kind`` (a later registration replaces an earlier one)."""
    _BUILDERS[kind] = builder


def policy_kinds(config: ExperimentConfig) -> list[str]:
    """The builders a policy saved with ``config`` needs, in the order they run."""
    kinds = ["latent"] if config.latent_curriculum else []
    kinds.append(config.algo)
    if config.policy.adapter is not None:
        kinds.append("adapter")
    return kinds


def build_policy(config: ExperimentConfig, obs_space: Any, act_space: Any) -> PolicyParts:
    """Fresh networks shaped as ``config`` says, ready for a saved state dict to load into."""
    parts = PolicyParts(config, obs_space, act_space)
    for kind in policy_kinds(config):
        if kind not in _BUILDERS and kind in _OWNERS:
            importlib.import_module(_OWNERS[kind])  # registers the kind
        if kind not in _BUILDERS:
            raise CheckpointError(f"no builder for policy kind {kind!r}; register one with register_builder")
        _BUILDERS[kind](parts)
    return parts


def _latent(parts: PolicyParts) -> None:
    """The policy acts on the latent of the encoder saved with it."""
    atari, latent_dim = parts.config.env.atari, parts.config.latent.latent_dim
    parts.encoder = FrameEncoder(atari.stack_num, atari.img_size, latent_dim)
    parts.obs_space = latent_space(latent_dim)
    if parts.config.latent.policy_input == "standardised":  # its statistics come with the state dict
        parts.input_norm = InputStandardiser(torch.zeros(latent_dim), torch.ones(latent_dim))


def _actor_critic(parts: PolicyParts) -> None:
    parts.network = build_actor_critic(parts.obs_space, parts.act_space, parts.config.policy, parts.input_norm)


def _q_network(parts: PolicyParts) -> None:
    parts.network = build_q_network(parts.obs_space, parts.act_space, parts.config.policy)


def _sac_actor(parts: PolicyParts) -> None:
    parts.network = build_sac_actor(parts.obs_space, parts.act_space, parts.config)


register_builder("latent", _latent)
register_builder("ppo", _actor_critic)
register_builder("dqn", _q_network)
register_builder("sac", _sac_actor)
