"""Replay for off-policy learners: one storage, a registered way to draw (``ReplayConfig.kind``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from frugalrl.config import ReplayConfig
from frugalrl.replay.registry import REPLAY_STORES
from frugalrl.replay.storage import Transitions, TransitionStorage
from frugalrl.replay.stores import PrioritizedReplay, ReplayStore, SumTree, TieredReplay, UniformReplay


def build_replay(
    config: ReplayConfig, obs_space: gym.spaces.Box, action_space: gym.Space, num_envs: int, seed: int = 0
) -> ReplayStore:
    """The store a config asks for; stacked uint8 frames are stored one frame per transition."""
    frames = obs_space.dtype == np.uint8 and len(obs_space.shape) == 3
    # float64 observations (MuJoCo) are kept as float32: what the networks take, half the bytes
    obs_dtype = np.float32 if obs_space.dtype == np.float64 else obs_space.dtype
    storage = TransitionStorage(
        obs_space.shape,
        obs_dtype,
        action_space.shape,
        action_space.dtype,
        num_envs,
        config.capacity,
        config.max_bytes,
        frame_stack=obs_space.shape[0] if frames else 1,
    )
    return REPLAY_STORES.entry(config.kind).factory(storage, seed, config, config.built_settings())


__all__ = [
    "REPLAY_STORES",
    "PrioritizedReplay",
    "ReplayStore",
    "SumTree",
    "TieredReplay",
    "Transitions",
    "TransitionStorage",
    "UniformReplay",
    "build_replay",
]
