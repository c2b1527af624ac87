"""Two vector envs with one interface: real frames seen through the encoder, and the world model.

PPO steps either without knowing which: both take a batch of actions and return
``(obs, reward, terminated, truncated, info)`` with latents of shape (N, latent_dim), and
``info["final_obs"]`` / ``info["episode"]`` the way the real env's wrappers provide them.

- ``EncodedVectorEnv`` wraps a real (Atari) vector env and replaces every frame stack by its
  latent under a frozen encoder.
- ``VirtualVectorEnv`` is the "virtual environment": episodes start from latents of real
  frames and continue in the learned world model (batched, torch-native) for at most
  ``horizon`` steps (short model rollouts, as in MBPO, so model error cannot compound far).
  Its reward is the heads' expected reward and an episode ends with the predicted probability
  (both calibrated: ``LatentWorldModel.reward_probs``), so the imagined rate of rewards and
  losses is the real one where the heads are right.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from frugalrl.cost import CostMeter
from frugalrl.latent.encoder import FrameEncoder
from frugalrl.latent.world_model import LatentWorldModel


def latent_space(latent_dim: int) -> gym.spaces.Box:
    return gym.spaces.Box(-1.0, 1.0, (latent_dim,), dtype=np.float32)


class EncodedVectorEnv:
    """A real vector env whose observations are the encoder's latents (encoder frozen)."""

    def __init__(self, env: gym.vector.VectorEnv, encoder: FrameEncoder, meter: CostMeter | None = None):
        self.env = env
        self.encoder = encoder.eval()
        self.meter = meter
        self.num_envs = env.num_envs
        self.single_observation_space = latent_space(encoder.latent_dim)
        self.single_action_space = env.single_action_space

    @torch.no_grad()
    def encode(self, frames: np.ndarray) -> torch.Tensor:
        batch = torch.as_tensor(frames)
        if self.meter is None:
            return self.encoder(batch)
        latents = self.meter.run_counted("encode", lambda: self.encoder(batch), len(batch))
        self.meter.count("encode", len(batch))  # the technique's overhead: every real frame is encoded
        return latents

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed)
        return self.encode(obs), info

    def step(self, actions: np.ndarray) -> tuple[torch.Tensor, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if "final_obs" in info:
            mask = info.get("_final_obs", np.ones(self.num_envs, dtype=bool))
            final = np.zeros((self.num_envs, self.encoder.latent_dim), dtype=np.float32)
            if mask.any():
                final[mask] = self.encode(np.stack(info["final_obs"][mask])).numpy()
            info = {**info, "final_obs": final}
        return self.encode(obs), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


class VirtualVectorEnv:
    """N imagined games in the latent world model, started from real latents."""

    def __init__(
        self,
        world_model: LatentWorldModel,
        start_latents: torch.Tensor,
        num_envs: int,
        horizon: int,
        noise: float = 0.0,
        seed: int = 0,
        meter: CostMeter | None = None,
    ):
        self.world_model = world_model
        self.start_latents = start_latents
        self.num_envs = num_envs
        self.horizon = horizon
        self.noise = noise
        self.meter = meter
        self.single_observation_space = latent_space(world_model.latent_dim)
        self.single_action_space = gym.spaces.Discrete(world_model.num_actions)
        self.generator = torch.Generator().manual_seed(seed)
        self.latent = torch.zeros(num_envs, world_model.latent_dim)
        self.steps = torch.zeros(num_envs, dtype=torch.long)
        self.returns = torch.zeros(num_envs)

    def set_start_latents(self, latents: torch.Tensor) -> None:
        """Dyna refresh: new episodes start from these (fresh real) latents."""
        self.start_latents = latents

    def _starts(self, n: int) -> torch.Tensor:
        index = torch.randint(0, len(self.start_latents), (n,), generator=self.generator)
        return self.start_latents[index].clone()

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.latent = self._starts(self.num_envs)
        self.steps.zero_()
        self.returns.zero_()
        return self.latent.clone(), {}

    @torch.no_grad()
    def step(self, actions: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        actions = torch.as_tensor(np.asarray(actions), dtype=torch.long)
        if self.meter is None:
            pred = self.world_model(self.latent, actions)
        else:
            pred = self.meter.run_counted(
                "world_model_step", lambda: self.world_model(self.latent, actions), self.num_envs
            )
            self.meter.count("world_model_step", self.num_envs)
        latent = pred.next_latent
        if self.noise > 0:
            noise = torch.randn(latent.shape, generator=self.generator) * self.noise
            latent = (latent + noise).clamp(-1.0, 1.0)
        # Imagined as the heads' calibrated probabilities say: the expected reward (an argmax never
        # picks a rare class), and an end drawn with its probability (so lost lives happen too).
        reward = self.world_model.expected_reward(pred)
        terminated = torch.rand(self.num_envs, generator=self.generator) < self.world_model.done_prob(pred)
        self.steps += 1
        self.returns += reward
        truncated = (self.steps >= self.horizon) & ~terminated
        ended = terminated | truncated
        info: dict[str, Any] = {}
        if ended.any():
            info["final_obs"] = latent.clone()
            info["_final_obs"] = ended.clone()
            info["episode"] = {"r": self.returns.clone(), "l": self.steps.clone()}
            info["_episode"] = ended.clone()
            latent = latent.clone()
            latent[ended] = self._starts(int(ended.sum()))
            self.steps[ended] = 0
            self.returns[ended] = 0.0
        self.latent = latent
        return latent.clone(), reward, terminated, truncated, info

    def close(self) -> None:
        pass
