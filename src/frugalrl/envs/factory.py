"""One factory for every environment family: classic control, Box2D, MuJoCo and Atari.

Atari games run in ale-py's native C++ vector env (preprocessing, frame stacking and
no-op resets happen there, in threads); everything else runs in ``FastSyncVectorEnv``.
The same wrappers then go on top in a fixed order, innermost first:

    EpisodeStatistics -> FrameStack -> ScaleReward -> ClipReward -> NormalizeObservation
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym

from frugalrl.config import DynamicsConfig, EnvConfig, ExperimentConfig
from frugalrl.envs.batched_cartpole import ENV_ID as BATCHED_ID
from frugalrl.envs.batched_cartpole import BatchedCartPole
from frugalrl.envs.dynamics import apply_dynamics
from frugalrl.envs.registry import ale_game_name, ensure_registered, is_atari
from frugalrl.envs.vector import FastSyncVectorEnv
from frugalrl.envs.wrappers import (
    ClipReward,
    EpisodeStatistics,
    FrameStack,
    LifeLossSignal,
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


def _registered(config: EnvConfig) -> str:
    """Import the config's env modules and find its id (the bare id gymnasium registered); one-line ``EnvError``."""
    try:
        return ensure_registered(config.id, config.imports)
    except EnvError as exc:
        raise EnvError(f"env {config.id!r}: {exc}") from None


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
            episodic_life=False,  # it resets the whole game at a lost life; LifeLossSignal cuts values instead
            use_fire_reset=atari.fire_reset,
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
    _registered(config)
    n = num_envs or config.num_envs
    if is_atari(config.id):
        if config.dynamics.changed:
            raise EnvError(f"env {config.id}: env.dynamics changes MuJoCo physics, not Atari; remove it")
        env: gym.vector.VectorEnv = make_atari_vector_env(config, n)
    elif config.batched and config.id == BATCHED_ID and not config.kwargs and not config.dynamics.changed:
        env = BatchedCartPole(n)
    else:
        env = FastSyncVectorEnv([partial(_make_single, config.id, dict(config.kwargs), config.dynamics)] * n)
    env = EpisodeStatistics(env)  # whole games: the life-loss signal below is for the learner only
    if training and is_atari(config.id) and config.atari.life_loss:
        env = LifeLossSignal(env)
    if config.frame_stack > 1 and not is_atari(config.id):
        env = FrameStack(env, config.frame_stack)
    if training and config.normalize_reward:
        env = ScaleReward(env, gamma=gamma)
    if training and config.clip_reward is not None:
        env = ClipReward(env, config.clip_reward)  # clips the scaled reward, as SB3's VecNormalize
    if training and config.normalize_obs and not is_atari(config.id):
        env = NormalizeObservation(env, clip=config.clip_obs)
    return env


def env_spaces(env_config: EnvConfig, seed: int = 0) -> tuple[gym.Space, gym.Space]:
    """Make one env of ``env_config`` (and reset it) to read its spaces; a one-line ``EnvError`` if it fails."""
    _registered(env_config)
    if is_atari(env_config.id):
        vector = make_atari_vector_env(env_config, 1)
        spaces = vector.single_observation_space, vector.single_action_space
        vector.close()
        return spaces
    try:
        env = _make_single(env_config.id, env_config.kwargs, env_config.dynamics)
        env.reset(seed=seed)
    except EnvError:
        raise
    except Exception as exc:  # gymnasium's own checks of kwargs raise plain errors
        message = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise EnvError(f"env {env_config.id} with env.kwargs {env_config.kwargs}: {message}") from None
    spaces = env.observation_space, env.action_space
    env.close()
    if env_config.frame_stack > 1:  # the policy sees the stack flattened
        import numpy as np

        shape = (int(np.prod(spaces[0].shape)) * env_config.frame_stack,)
        spaces = gym.spaces.Box(-np.inf, np.inf, shape), spaces[1]
    return spaces


def check_env(config: ExperimentConfig) -> tuple[gym.Space, gym.Space]:
    """Make the config's env once and check that the run can use it; its (observation, action) spaces.

    What would otherwise fail deep inside a run (or, worse, run wrong): env.kwargs gymnasium
    rejects, an algorithm that cannot act in the action space (SAC needs continuous actions,
    DQN discrete ones), the latent curriculum on a game without frames. One-line ``EnvError``.
    """
    env_config = config.env
    if config.latent_curriculum and not is_atari(env_config.id):
        raise EnvError(f"env {env_config.id}: the latent curriculum encodes Atari frames; use an ALE/ game")
    observation, action = env_spaces(env_config, config.seed)
    needs = {"sac": gym.spaces.Box, "dqn": gym.spaces.Discrete}.get(config.algo)
    if needs is not None and not isinstance(action, needs):
        kind = "continuous (Box)" if needs is gym.spaces.Box else "discrete"
        fits = "ppo or dqn" if config.algo == "sac" else "ppo or sac"
        raise EnvError(
            f"algo {config.algo} needs {kind} actions and {env_config.id} has {type(action).__name__}; "
            f"use algo {fits}, or an env with {kind} actions"
        )
    if not isinstance(action, gym.spaces.Box | gym.spaces.Discrete):
        raise EnvError(f"env {env_config.id}: {type(action).__name__} actions are not supported; Box or Discrete only")
    return observation, action
