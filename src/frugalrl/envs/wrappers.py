"""Vector-env wrappers: episode statistics, frame stacking, observation and reward normalisation.

Each wrapper transforms ``final_obs`` the same way as ordinary observations, so a value
bootstrapped from a truncated episode sees what the policy sees. Wrappers that learn
running statistics expose ``state_dict`` / ``load_state_dict`` so checkpoints and exported
policies carry them, and a ``training`` flag that freezes them for evaluation.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch


class RunningMeanStd:
    """Streaming mean and variance (parallel algorithm of Chan et al.)."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        batch_mean = batch.mean(axis=0)
        batch_var = batch.var(axis=0)
        batch_count = batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": torch.from_numpy(np.array(self.mean, dtype=np.float64)),
            "var": torch.from_numpy(np.array(self.var, dtype=np.float64)),
            "count": float(self.count),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = state["mean"].numpy().astype(np.float64).reshape(self.mean.shape)
        self.var = state["var"].numpy().astype(np.float64).reshape(self.var.shape)
        self.count = float(state["count"])


def _map_final_obs(info: dict[str, Any], fn: Any) -> dict[str, Any]:
    if "final_obs" in info:
        info = dict(info)
        info["final_obs"] = fn(info["final_obs"])
    return info


class EpisodeStatistics(gym.vector.VectorWrapper):
    """Adds ``info["episode"] = {"r", "l"}`` and mask ``info["_episode"]`` on episode ends.

    Sits directly on the raw env so returns are the game's own, before any reward scaling.
    """

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self._returns[:] = 0
        self._lengths[:] = 0
        return self.env.reset(**kwargs)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self._returns += rewards
        self._lengths += 1
        done = terminated | truncated
        if done.any():
            info = dict(info)
            info["episode"] = {"r": np.where(done, self._returns, 0.0), "l": np.where(done, self._lengths, 0)}
            info["_episode"] = done.copy()
            self._returns[done] = 0
            self._lengths[done] = 0
        return obs, rewards, terminated, truncated, info

    def state_dict(self) -> dict[str, Any]:
        return {"returns": torch.from_numpy(self._returns.copy()), "lengths": torch.from_numpy(self._lengths.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._returns = state["returns"].numpy().copy()
        self._lengths = state["lengths"].numpy().copy()


class LifeLossSignal(gym.vector.VectorWrapper):
    """A lost life is ``terminated`` for the learner (its value target stops there), but the game
    goes on: no reset, and ``EpisodeStatistics`` below still counts whole games.

    ALE reports the lives left in ``info["lives"]``; a life is lost when that count drops within a
    game (at a game's end the autoreset already returns the next game's first frame and lives).
    """

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self._lives: np.ndarray | None = None

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._lives = np.asarray(info["lives"]).copy() if "lives" in info else None
        return obs, info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        if "lives" in info:
            lives = np.asarray(info["lives"])
            if self._lives is not None:
                lost = (lives < self._lives) & ~(terminated | truncated)
                if lost.any():
                    terminated = terminated | lost
                    info = {**info, "life_lost": lost}
            self._lives = lives.copy()
        return obs, rewards, terminated, truncated, info


class FrameStack(gym.vector.VectorWrapper):
    """Stacks the last ``k`` observations along a new axis 1: ``(n, k, *obs_shape)``."""

    def __init__(self, env: gym.vector.VectorEnv, k: int):
        super().__init__(env)
        self.k = k
        space = env.single_observation_space
        low = np.repeat(space.low[None], k, axis=0)
        high = np.repeat(space.high[None], k, axis=0)
        self.single_observation_space = gym.spaces.Box(low, high, dtype=space.dtype)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self._frames = np.zeros((self.num_envs, k, *space.shape), dtype=space.dtype)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._frames[:] = obs[:, None]
        return self._frames.copy(), info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self._frames = np.roll(self._frames, -1, axis=1)
        if "final_obs" in info:
            # The final stack ends with the final frame; a reset env starts a fresh stack.
            final = self._frames.copy()
            final[:, -1] = info["final_obs"]
            info = dict(info)
            info["final_obs"] = final
            done = terminated | truncated
            self._frames[done] = obs[done, None]
        self._frames[:, -1] = obs
        return self._frames.copy(), rewards, terminated, truncated, info


class NormalizeObservation(gym.vector.VectorWrapper):
    """Running mean/std observation normalisation, clipped to ``[-clip, clip]``."""

    def __init__(self, env: gym.vector.VectorEnv, clip: float = 10.0, epsilon: float = 1e-8):
        super().__init__(env)
        self.rms = RunningMeanStd(env.single_observation_space.shape)
        self.clip = clip
        self.epsilon = epsilon
        self.training = True
        self.single_observation_space = gym.spaces.Box(-clip, clip, env.single_observation_space.shape, np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        scaled = (obs - self.rms.mean) / np.sqrt(self.rms.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if self.training:
            self.rms.update(obs)
        return self.normalize(obs), _map_final_obs(info, self.normalize)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        if self.training:
            self.rms.update(obs)
        return self.normalize(obs), rewards, terminated, truncated, _map_final_obs(info, self.normalize)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)


class ScaleReward(gym.vector.VectorWrapper):
    """Divides rewards by the running std of the discounted return (as SB3's VecNormalize)."""

    def __init__(self, env: gym.vector.VectorEnv, gamma: float, epsilon: float = 1e-8):
        super().__init__(env)
        self.gamma = gamma
        self.epsilon = epsilon
        self.rms = RunningMeanStd(())
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self.training = True

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self._returns = self._returns * self.gamma + rewards
        if self.training:
            self.rms.update(self._returns)
        self._returns[terminated | truncated] = 0.0
        return obs, rewards / np.sqrt(self.rms.var + self.epsilon), terminated, truncated, info

    def state_dict(self) -> dict[str, Any]:
        return {**self.rms.state_dict(), "returns": torch.from_numpy(self._returns.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)
        self._returns = state["returns"].numpy().copy()


class ClipReward(gym.vector.VectorWrapper):
    """Clips rewards to ``[-bound, bound]``."""

    def __init__(self, env: gym.vector.VectorEnv, bound: float):
        super().__init__(env)
        self.bound = bound

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        return obs, np.clip(rewards, -self.bound, self.bound), terminated, truncated, info


def wrapper_chain(env: gym.vector.VectorEnv) -> list[gym.vector.VectorEnv]:
    """Outermost first, down to and including the base env."""
    chain = [env]
    while isinstance(chain[-1], gym.vector.VectorWrapper):
        chain.append(chain[-1].env)
    return chain


def find_wrapper(env: gym.vector.VectorEnv, kind: type) -> Any | None:
    return next((layer for layer in wrapper_chain(env) if isinstance(layer, kind)), None)


def env_state_dict(env: gym.vector.VectorEnv) -> dict[str, Any]:
    """Learned statistics of every stateful wrapper, keyed by wrapper class name."""
    return {type(layer).__name__: layer.state_dict() for layer in wrapper_chain(env) if hasattr(layer, "state_dict")}


def load_env_state_dict(env: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    for layer in wrapper_chain(env):
        name = type(layer).__name__
        if hasattr(layer, "load_state_dict") and name in state:
            layer.load_state_dict(state[name])


def set_training(env: gym.vector.VectorEnv, training: bool) -> None:
    """Freeze (False) or resume (True) the running statistics of every wrapper."""
    for layer in wrapper_chain(env):
        if hasattr(layer, "training"):
            layer.training = training
