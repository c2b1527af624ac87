"""Proximal Policy Optimization (Schulman et al. 2017), readable top to bottom.

One update = collect ``num_steps`` transitions from each of ``num_envs`` envs, compute GAE
advantages, then ``update_epochs`` passes of clipped-surrogate minibatch SGD. Discrete
(categorical) and continuous (Gaussian) actions; MLP or Nature-CNN torsos.

Conventions follow Stable-Baselines3 so RL Zoo hyperparameters mean the same thing here:
``batch_size`` is the minibatch size, the value loss is a plain MSE weighted by ``vf_coef``,
truncated episodes bootstrap from the value of their final observation, and target-KL
stops an update early once ``approx_kl > 1.5 * target_kl``.

Shapes: T = num_steps, N = num_envs, B = T * N, M = minibatch size.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.errors import TrainingDiverged
from frugalrl.nets.policy import ActorCritic, build_actor_critic
from frugalrl.selection import AllSamples, RolloutBatch, SampleSelector


def _fast_adam(device: torch.device) -> dict[str, bool]:
    """Fused Adam: one kernel for all parameters (on CPU about 6x faster than the loop)."""
    return {"fused": True} if device.type in ("cpu", "cuda") else {}


def _weighted_mean(values: torch.Tensor, weights: torch.Tensor | None, denominator: float) -> torch.Tensor:
    """``sum(w * values) / denominator``; a plain mean when every weight is 1 (the fast path)."""
    if weights is None:
        return values.sum() / denominator if denominator != len(values) else values.mean()
    return (weights * values).sum() / denominator


class PPO:
    """The PPO learner. ``run_update()`` does one collect-and-learn cycle."""

    def __init__(
        self,
        config: ExperimentConfig,
        env: gym.vector.VectorEnv,
        meter: CostMeter,
        device: torch.device,
        selector: SampleSelector | None = None,
        *,
        policy: ActorCritic | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        virtual: bool = False,
    ):
        """``policy`` / ``optimizer`` share a network with another learner (the latent curriculum's
        real and virtual sources); ``virtual=True`` counts env steps as virtual, not real."""
        self.config = config
        self.virtual = virtual
        self.hp = config.ppo
        self.env = env
        self.meter = meter
        self.device = device
        self.num_envs = env.num_envs
        self.policy: ActorCritic = policy or build_actor_critic(
            env.single_observation_space, env.single_action_space, config.policy
        ).to(device)
        self.selector: SampleSelector = selector or AllSamples()  # which samples get compute
        self.gradient_sync: Callable[..., None] | None = None  # multi-worker runs: fuses gradients
        self.optimizer = optimizer or torch.optim.Adam(
            self.policy.parameters(), lr=self.hp.learning_rate, eps=self.hp.adam_eps, **_fast_adam(device)
        )

        self.rollout_size = self.num_envs * self.hp.num_steps
        self.num_updates = math.ceil(self.hp.total_timesteps / self.rollout_size)
        self.update = 0  # completed updates
        self.global_step = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.recent_lengths: deque[int] = deque(maxlen=100)

        action_space = env.single_action_space
        self.continuous = isinstance(action_space, gym.spaces.Box)
        if self.continuous:
            self.action_low = torch.as_tensor(action_space.low, device=device)
            self.action_high = torch.as_tensor(action_space.high, device=device)

        T, N = self.hp.num_steps, self.num_envs
        obs_space = env.single_observation_space
        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        act_shape = action_space.shape if self.continuous else ()
        self.obs = torch.zeros((T, N, *obs_space.shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros(
            (T, N, *act_shape), dtype=torch.float32 if self.continuous else torch.long, device=device
        )
        self.logprobs = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.dones = torch.zeros((T, N), device=device)  # 1 where the episode ended at step t
        self.values = torch.zeros((T, N), device=device)
        num_params = 2 * int(np.prod(act_shape)) if self.continuous else int(action_space.n)
        self.dist_params = torch.zeros((T, N, num_params), device=device)  # log-probs, or mean and log-std
        self.next_obs: torch.Tensor | None = None

    # ------------------------------------------------------------------ helpers
    def _to_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(obs, device=self.device)

    def _env_action(self, action: torch.Tensor) -> np.ndarray:
        if self.continuous:  # sample unclipped, step clipped (log-probs stay exact)
            action = torch.max(torch.min(action, self.action_high), self.action_low)
        return action.cpu().numpy()

    def start(self, seed: int) -> None:
        """Reset the envs; the first observation of training."""
        obs, _ = self.env.reset(seed=seed)
        self.next_obs = self._to_tensor(obs)

    # ------------------------------------------------------------------ rollout
    @torch.inference_mode()
    def collect_rollout(self) -> None:
        """Fill the rollout buffers with T steps of N envs."""
        gamma = self.hp.gamma
        for t in range(self.hp.num_steps):
            obs = self.next_obs
            self.obs[t] = obs
            with self.meter.timed("act"):
                action, logprob, value, params = self.meter.run_counted(
                    "act", lambda o=obs: self.policy.act(o), self.num_envs
                )
            self.meter.inference_samples += self.num_envs
            self.actions[t], self.logprobs[t], self.values[t], self.dist_params[t] = action, logprob, value, params

            with self.meter.timed("env"):
                next_obs, reward, terminated, truncated, info = self.env.step(self._env_action(action))
            if self.virtual:
                self.meter.virtual_env_steps += self.num_envs
            else:
                self.meter.real_env_steps += self.num_envs
            self.global_step += self.num_envs

            reward = torch.as_tensor(reward, dtype=torch.float32, device=self.device)
            # A time-limit truncation is not a real end: bootstrap from the final observation.
            cut = truncated & ~terminated
            if cut.any() and "final_obs" in info:
                final_obs = self._to_tensor(info["final_obs"][cut])
                reward[torch.as_tensor(cut, device=self.device)] += gamma * self.policy.get_value(final_obs)
                self.meter.inference_samples += int(cut.sum())
            self.rewards[t] = reward
            self.dones[t] = torch.as_tensor(terminated | truncated, dtype=torch.float32, device=self.device)
            self.next_obs = self._to_tensor(next_obs)

            if "_episode" in info:
                ended = info["_episode"]
                self.recent_returns.extend(info["episode"]["r"][ended].tolist())
                self.recent_lengths.extend(info["episode"]["l"][ended].tolist())

    @torch.no_grad()
    def compute_advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Generalised advantage estimation (Schulman et al. 2016): advantages and returns, (T, N)."""
        hp = self.hp
        next_value = self.policy.get_value(self.next_obs)
        advantages = torch.zeros_like(self.rewards)
        last_gae = torch.zeros(self.num_envs, device=self.device)
        for t in reversed(range(hp.num_steps)):
            not_done = 1.0 - self.dones[t]
            following = next_value if t == hp.num_steps - 1 else self.values[t + 1]
            delta = self.rewards[t] + hp.gamma * following * not_done - self.values[t]
            last_gae = delta + hp.gamma * hp.gae_lambda * not_done * last_gae
            advantages[t] = last_gae
        return advantages, advantages + self.values

    # ------------------------------------------------------------------ learning
    def learn(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """``update_epochs`` passes of minibatch SGD on the clipped surrogate objective."""
        hp = self.hp
        progress_left = 1.0 - self.update / self.num_updates
        lr = hp.learning_rate * (progress_left if hp.anneal_lr else 1.0)
        clip = hp.clip_coef * (progress_left if hp.anneal_clip else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

        # Flatten (T, N, ...) -> (B, ...)
        b_obs = self.obs.reshape((-1, *self.obs.shape[2:]))
        b_actions = self.actions.reshape((-1, *self.actions.shape[2:]))
        b_logprobs = self.logprobs.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = self.values.reshape(-1)
        batch = RolloutBatch(
            b_obs, b_actions, b_logprobs, self.dist_params.reshape(self.rollout_size, -1), b_advantages, b_returns
        )
        self.selector.on_rollout(batch, self.global_step)

        stats: list[torch.Tensor] = []  # one row of detached scalars per minibatch, read once at the end
        stop = False
        for _epoch in range(hp.update_epochs):
            order = torch.randperm(self.rollout_size, device=self.device)
            for start in range(0, self.rollout_size, hp.batch_size):
                mb = order[start : start + hp.batch_size]  # (M,) the minibatch
                chosen = self.selector.select(mb, self.global_step)
                idx, weights, denominator = chosen.indices, chosen.weights, chosen.denominator  # (k,) kept
                k = len(idx)
                if k == 0:
                    continue
                newlogprob, entropy, newvalue = self.meter.run_counted(
                    "forward", lambda i=idx: self.policy.evaluate(b_obs[i], b_actions[i]), k
                )
                self.meter.forward_samples += k
                logratio = newlogprob - b_logprobs[idx]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()  # Schulman's k3 estimator
                if hp.target_kl is not None and approx_kl > 1.5 * hp.target_kl:
                    stop = True
                    break

                adv = b_advantages[idx]
                if hp.norm_adv and len(mb) > 1:  # statistics of the whole minibatch, kept or not
                    mb_adv = b_advantages[mb] if k < len(mb) else adv
                    adv = (adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                policy_term = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
                if hp.clip_vloss:
                    clipped = b_values[idx] + (newvalue - b_values[idx]).clamp(-clip, clip)
                    value_term = torch.max((newvalue - b_returns[idx]) ** 2, (clipped - b_returns[idx]) ** 2)
                else:
                    value_term = (newvalue - b_returns[idx]) ** 2
                policy_loss = _weighted_mean(policy_term, weights, denominator)
                value_loss = _weighted_mean(value_term, weights, denominator)
                entropy_mean = _weighted_mean(entropy, weights, denominator)
                loss = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy_mean
                if not torch.isfinite(loss):
                    raise TrainingDiverged(
                        f"PPO loss became {loss.item()} at update {self.update + 1}; lower ppo.learning_rate "
                        "or turn on env.normalize_obs / env.normalize_reward"
                    )

                self.optimizer.zero_grad(set_to_none=True)
                self.meter.run_counted("backward", loss.backward, k)
                self.meter.backward_samples += k
                if self.gradient_sync is not None:
                    self.gradient_sync(self.policy.parameters())
                nn.utils.clip_grad_norm_(self.policy.parameters(), hp.max_grad_norm)
                self.optimizer.step()

                with torch.no_grad():
                    clip_fraction = ((ratio - 1).abs() > clip).float().mean()
                    stats.append(torch.stack([policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction]))
            if stop:
                break

        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        means = torch.stack(stats).mean(0).tolist() if stats else [0.0] * len(names)
        metrics = dict(zip(names, means, strict=True))
        metrics["explained_variance"] = float(1 - (b_returns - b_values).var() / (b_returns.var() + 1e-8))
        metrics["learning_rate"] = lr
        metrics["clip_coef"] = clip
        metrics["early_stop"] = float(stop)
        if hasattr(self.selector, "metrics"):
            metrics.update(self.selector.metrics())
        return metrics

    def run_update(self) -> dict[str, float]:
        """Collect one rollout and learn from it; returns the update's metrics."""
        if self.next_obs is None:
            raise RuntimeError("call start(seed) before run_update()")
        self.collect_rollout()
        with self.meter.timed("learn"):
            advantages, returns = self.compute_advantages()
            metrics = self.learn(advantages, returns)
        self.update += 1
        if self.recent_returns:
            metrics["episode_return"] = float(np.mean(self.recent_returns))
            metrics["episode_length"] = float(np.mean(self.recent_lengths))
        return metrics

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Everything the learner needs to continue exactly where it stopped."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "update": self.update,
            "global_step": self.global_step,
            "next_obs": self.next_obs,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "selector": self.selector.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.update = int(state["update"])
        self.global_step = int(state["global_step"])
        self.next_obs = state["next_obs"].to(self.device)
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])
        self.selector.load_state_dict(state["selector"])
