"""ALE games read frame by frame with their RAM: the data source of encoder pretraining and probes.

ale-py's native vector env (``make_atari_vector_env``) is the fast path for training but does
not expose the console RAM, and the latent probe needs it (AtariARI labels such as Breakout's
ball position live there). ``AtariFrameReader`` runs N plain ALE envs and applies the same
Nature-DQN preprocessing in numpy/torch: action repeat ``frameskip``, max over the last two
raw frames, grayscale, resize to ``img_size`` (antialiased bilinear), up to ``noop_max``
no-ops after reset and fire on reset where the game needs it (random-play frames for encoder
pretraining: a served ball makes more of them informative; a policy's own play, in the vector
env, presses FIRE only with ``env.atari.fire_reset``). Measured against the vector
env on Breakout the frames differ by about one grey level on average (resize kernels differ).

It returns single frames (N, H, W) uint8; stacking is the dataset's job, so each frame is
stored once.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from frugalrl.config import EnvConfig
from frugalrl.envs.registry import _register_ale, validate_env_id
from frugalrl.errors import EnvError
from frugalrl.nets.screens import resize_grey


def resize_frames(frames: np.ndarray, size: int) -> np.ndarray:
    """(N, 210, 160) uint8 grayscale -> (N, size, size) uint8."""
    return resize_grey(torch.as_tensor(frames), size).numpy()


class AtariFrameReader:
    """N ALE games stepped together; frames, rewards, episode ends and RAM per step."""

    def __init__(self, config: EnvConfig, num_envs: int, seed: int = 0):
        if not validate_env_id(config.id):
            raise EnvError(f"env {config.id!r} is not registered with gymnasium; use an ALE id such as ALE/Breakout-v5")
        _register_ale()
        atari = config.atari
        self.config = config
        self.num_envs = num_envs
        self.frameskip = atari.frameskip
        self.img_size = atari.img_size
        self.noop_max = atari.noop_max
        self.envs = [
            gym.make(
                config.id,
                frameskip=1,
                obs_type="grayscale",
                repeat_action_probability=atari.repeat_action_probability,
                max_episode_steps=atari.max_episode_steps * atari.frameskip,
                disable_env_checker=True,
            )
            for _ in range(num_envs)
        ]
        self.action_space: gym.spaces.Discrete = self.envs[0].action_space
        meanings = self.envs[0].unwrapped.get_action_meanings()
        self.fire_action = meanings.index("FIRE") if "FIRE" in meanings else None
        self.rng = np.random.default_rng(seed)
        self.seed = seed

    # -------------------------------------------------------------- one env
    def _repeat(self, env: gym.Env, action: int) -> tuple[np.ndarray, float, bool, bool]:
        raw, total, terminated, truncated = [], 0.0, False, False
        for _ in range(self.frameskip):
            frame, reward, terminated, truncated, _ = env.step(action)
            raw.append(frame)
            total += float(reward)
            if terminated or truncated:
                break
        pooled = np.maximum(raw[-1], raw[-2]) if len(raw) > 1 else raw[-1]
        return pooled, total, terminated, truncated

    def _reset_one(self, i: int, seed: int | None) -> np.ndarray:
        env = self.envs[i]
        frame, _ = env.reset(seed=seed)
        for _ in range(int(self.rng.integers(0, self.noop_max + 1))):
            frame, _, terminated, truncated = self._repeat(env, 0)
            if terminated or truncated:
                frame, _ = env.reset()
        if self.fire_action is not None:
            frame, _, terminated, truncated = self._repeat(env, self.fire_action)
            if terminated or truncated:
                frame, _ = env.reset()
        return frame

    def ram(self) -> np.ndarray:
        """(N, 128) uint8: each console's RAM now."""
        return np.stack([env.unwrapped.ale.getRAM() for env in self.envs])

    # -------------------------------------------------------------- the batch
    def reset(self, seed: int | None = None) -> np.ndarray:
        seed = self.seed if seed is None else seed
        raw = [self._reset_one(i, seed + i) for i in range(self.num_envs)]
        return resize_frames(np.stack(raw), self.img_size)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every game; an ended game restarts at once (its first frame is returned).

        Returns frames (N, H, W) uint8, rewards (N,), terminated (N,), truncated (N,) and a
        ``started`` flag (N,) that marks frames which begin a new episode.
        """
        raw, rewards = [], np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, env in enumerate(self.envs):
            frame, rewards[i], terminated[i], truncated[i] = self._repeat(env, int(actions[i]))
            if terminated[i] or truncated[i]:
                frame = self._reset_one(i, None)
            raw.append(frame)
        started = terminated | truncated
        return resize_frames(np.stack(raw), self.img_size), rewards, terminated, truncated, started

    def close(self) -> None:
        for env in self.envs:
            env.close()
