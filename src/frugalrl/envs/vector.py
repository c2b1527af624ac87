"""A lean synchronous vector env with same-step autoreset.

gymnasium's ``SyncVectorEnv`` merges every sub-env's info dict on every step, which costs
more than stepping CartPole itself. Trainers here need only the observations, rewards, done
flags and, for time-limit bootstrapping, the final observation of an episode; this class
returns exactly that, into preallocated arrays. Autoreset is same-step: when an episode
ends, the returned observation is already the next episode's first one and the last one is
in ``info["final_obs"]`` (rows masked by ``info["_final_obs"]``).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space


class FastSyncVectorEnv(gym.vector.VectorEnv):
    """Steps ``num_envs`` gymnasium envs in turn; same-step autoreset; minimal info."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        shape = first.observation_space.shape
        dtype = first.observation_space.dtype
        self._obs = np.zeros((self.num_envs, *shape), dtype=dtype)
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminated = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncated = np.zeros(self.num_envs, dtype=np.bool_)

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        for i, (env, env_seed) in enumerate(zip(self.envs, seeds, strict=True)):
            self._obs[i], _ = env.reset(seed=env_seed, options=options)
        return self._obs.copy(), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        info: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, _ = env.step(actions[i])
            self._rewards[i] = reward
            self._terminated[i] = terminated
            self._truncated[i] = truncated
            if terminated or truncated:
                if not info:
                    info["final_obs"] = np.zeros_like(self._obs)
                    info["_final_obs"] = np.zeros(self.num_envs, dtype=np.bool_)
                info["final_obs"][i] = obs
                info["_final_obs"][i] = True
                obs, _ = env.reset()
            self._obs[i] = obs
        return (
            self._obs.copy(),
            self._rewards.copy(),
            self._terminated.copy(),
            self._truncated.copy(),
            info,
        )

    def snapshot(self) -> bytes | None:
        """The sub-envs' full state (physics, RNGs, time limits), or None if not picklable."""
        try:
            return pickle.dumps((self.envs, self._obs))
        except Exception:  # envs holding C handles (Box2D worlds) cannot be pickled
            return None

    def restore(self, blob: bytes) -> None:
        self.envs, self._obs = pickle.loads(blob)  # noqa: S301 - our own checkpoint

    def close(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
