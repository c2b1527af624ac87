"""One factory for every environment family: classic control, Box2D, MuJoCo and Atari.

Atari games run in ale-py's native C++ vector env (preprocessing, frame stacking and
no-op resets happen there, in threads); everything else runs in ``FastSyncVectorEnv``.
The same wrappers then go on top in a fixed order, innermost first:

    EpisodeStatistics -> FrameStack -> ScaleReward -> ClipReward -> NormalizeObservation
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym

from frugalrl.config import DynamicsConfig, EnvConfig
from frugalrl.envs.batched_cartpole import ENV_ID as BATCHED_ID
from frugalrl.envs.batched_cartpole import BatchedCartPole
from frugalrl.envs.dynamics import apply_dynamics
from frugalrl.envs.registry import ale_game_name, is_atari, validate_env_id
from frugalrl.envs.vector import FastSyncVectorEnv
from frugalrl.envs.wrappers import (
    ClipReward,
    EpisodeStatistics,
    FrameStack,
    NormalizeObservation,
    ScaleReward,
)
from frugalrl.errors import EnvError


def _make_single(env_id: str, kwargs: dict, dynamics: DynamicsConfig | None = None) -> gym.Env:
    try:
        env = gym.make(env_id, disable_env_checker=True, **kwargs)
        return apply_dynamics(env, dynamics, env_id) if dynamics is not None else env
    except gym.error.DependencyNotInstalled as exc:
        raise EnvError(f"env {env_id}: {exc}; install the extra with `pip install -e .`") from None
    except TypeError as exc:
        raise EnvError(f"env {env_id}: bad env.kwargs {kwargs}: {exc}") from None


def make_atari_vector_env(config: EnvConfig, num_envs: int, num_threads: int = 0) -> gym.vector.VectorEnv:
    """ale-py's native vector env with same-step autoreset and Nature-DQN preprocessing.

    ``num_threads=0`` lets ale-py use one C++ thread per core.
    """
    from ale_py.vector_env import AtariVectorEnv

    game = ale_game_name(config.id)
    atari = config.atari
    try:
        return AtariVectorEnv(
            game,
            num_envs,
            autoreset_mode="SameStep",
            num_threads=num_threads,
            img_height=atari.img_size,
            img_width=atari.img_size,
            grayscale=atari.grayscale,
            stack_num=atari.stack_num,
            frameskip=atari.frameskip,
            noop_max=atari.noop_max,
            episodic_life=atari.episodic_life,
            repeat_action_probability=atari.repeat_action_probability,
            max_num_frames_per_episode=atari.max_episode_steps,
            reward_clipping=False,  # ClipReward does it, so episode returns stay raw
            **config.kwargs,
        )
    except (RuntimeError, ValueError) as exc:
        raise EnvError(
            f"env {config.id}: ALE could not load ROM {game!r} ({exc}); "
            "ale-py ships its ROMs: reinstall it with `pip install --force-reinstall ale-py`"
        ) from None


def make_vec_env(
    config: EnvConfig,
    num_envs: int | None = None,
    *,
    gamma: float = 0.99,
    training: bool = True,
) -> gym.vector.VectorEnv:
    """Build the wrapped vector env a config describes.

    ``training=False`` builds an evaluation env: raw rewards and raw observations, since
    an ``ExportedPolicy`` carries its own observation normalisation.
    """
    if not validate_env_id(config.id):
        raise EnvError(f"env {config.id!r} is not registered with gymnasium")
    n = num_envs or config.num_envs
    if is_atari(config.id):
        if config.dynamics.changed:
            raise EnvError(f"env {config.id}: env.dynamics changes MuJoCo physics, not Atari; remove it")
        env: gym.vector.VectorEnv = make_atari_vector_env(config, n)
    elif config.batched and config.id == BATCHED_ID and not config.kwargs and not config.dynamics.changed:
        env = BatchedCartPole(n)
    else:
        env = FastSyncVectorEnv([partial(_make_single, config.id, dict(config.kwargs), config.dynamics)] * n)
    env = EpisodeStatistics(env)
    if config.frame_stack > 1 and not is_atari(config.id):
        env = FrameStack(env, config.frame_stack)
    if training and config.normalize_reward:
        env = ScaleReward(env, gamma=gamma)
    if training and config.clip_reward is not None:
        env = ClipReward(env, config.clip_reward)  # clips the scaled reward, as SB3's VecNormalize
    if training and config.normalize_obs and not is_atari(config.id):
        env = NormalizeObservation(env, clip=config.clip_obs)
    return env
