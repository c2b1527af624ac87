"""Environments: the factory, the fast vector env and the wrappers."""

from frugalrl.envs.factory import make_vec_env
from frugalrl.envs.registry import is_atari, validate_env_id
from frugalrl.envs.vector import FastSyncVectorEnv
from frugalrl.envs.wrappers import env_state_dict, load_env_state_dict, set_training

__all__ = [
    "FastSyncVectorEnv",
    "env_state_dict",
    "is_atari",
    "load_env_state_dict",
    "make_vec_env",
    "set_training",
    "validate_env_id",
]
