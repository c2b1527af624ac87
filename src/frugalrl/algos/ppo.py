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
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from frugalrl.algos.base import LearnerBase
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.optim_step import ClipAndStep
from frugalrl.algos.ppo_step import STAT_NAMES, Minibatch, PPOStep
from frugalrl.algos.step_kinds import make_step
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter, StepCounter, count_real_steps
from frugalrl.errors import TrainingDiverged
from frugalrl.nets.policy import ActorCritic, ActOutput, build_actor_critic
from frugalrl.selection import AllSamples, RolloutBatch, SampleSelector, Selection


def _fast_adam(device: torch.device) -> dict[str, bool]:
    """Fused Adam: one kernel for all parameters (on CPU about 6x faster than the loop)."""
    return {"fused": True} if device.type in ("cpu", "cuda") else {}


class PPO(LearnerBase):
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
        count_steps: StepCounter = count_real_steps,
        gradient_sync: GradientSync = LOCAL_SYNC,
        schedule: PPO | None = None,
        first_update: int = 0,
    ):
        """``policy`` / ``optimizer`` share a network with another learner (the latent curriculum's
        real and imagined sources); ``count_steps`` books the env steps (real, or
        ``count_virtual_steps`` for a world model); ``gradient_sync`` runs after every backward().
        ``schedule``: follow that learner's lr / clip annealing (its update count) instead of this
        one's; ``first_update``: continue another learner's schedule from that many updates."""
        self.config = config
        self.count_steps = count_steps
        self.hp = config.ppo
        self.env = env
        self.meter = meter
        self.device = device
        self.num_envs = env.num_envs
        self.policy: ActorCritic = policy or build_actor_critic(
            env.single_observation_space, env.single_action_space, config.policy
        ).to(device)
        self.selector: SampleSelector = selector or AllSamples(device)  # which samples get compute
        self._step: PPOStep | None = None  # built on first use: see ``step``
        self._params: list[nn.Parameter] = []
        self._optim: ClipAndStep | None = None
        self.gradient_sync = gradient_sync  # multi-worker runs: fuses gradients
        self.optimizer = optimizer or torch.optim.Adam(
            self.policy.parameters(), lr=self.hp.learning_rate, eps=self.hp.adam_eps, **_fast_adam(device)
        )

        self.rollout_size = self.num_envs * self.hp.num_steps
        self.num_updates = math.ceil(self.hp.total_timesteps / self.rollout_size)
        self.update = first_update  # completed updates (of the lr / clip schedule)
        self.schedule = schedule
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
        tensor = torch.as_tensor(obs, device=self.device)
        # MuJoCo gives float64 (normalize_obs casts it; without it, the networks need float32 too)
        return tensor.float() if tensor.dtype == torch.float64 else tensor

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
                    "act", lambda o=obs: self._act(o), self.num_envs
                )
            if self.meter.flops_per_sample["act"] == 0.0 and hasattr(self.step, "act_flops"):
                # acting outside torch (the fused step's NumPy path): counted on its torch twin
                self.meter.flops_per_sample["act"] = self.step.act_flops(obs) / self.num_envs
            self.meter.inference_samples += self.num_envs
            self.actions[t], self.logprobs[t], self.values[t], self.dist_params[t] = action, logprob, value, params

            with self.meter.timed("env"):
                next_obs, reward, terminated, truncated, info = self.env.step(self._env_action(action))
            self.count_steps(self.meter, self.num_envs)
            self.global_step += self.num_envs

            # A time-limit truncation is not a real end: bootstrap from the final observation.
            cut = truncated & ~terminated
            if cut.any() and "final_obs" in info:
                reward = torch.as_tensor(reward, dtype=torch.float32, device=self.device)
                final_obs = self._to_tensor(info["final_obs"][cut])
                reward[torch.as_tensor(cut, device=self.device)] += gamma * self.policy.get_value(final_obs)
                self.meter.inference_samples += int(cut.sum())
            # as_tensor shares the env's array; the copy into the float32 buffer converts on the way
            self.rewards[t] = torch.as_tensor(reward, device=self.device)
            self.dones[t] = torch.as_tensor(terminated | truncated, device=self.device)
            self.next_obs = self._to_tensor(next_obs)

            if "_episode" in info:
                ended = info["_episode"]
                self.recent_returns.extend(info["episode"]["r"][ended].tolist())
                self.recent_lengths.extend(info["episode"]["l"][ended].tolist())

    @torch.no_grad()
    def compute_advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Generalised advantage estimation (Schulman et al. 2016): advantages and returns, (T, N).

        The backward recursion runs in NumPy on the host: T tiny steps, where torch would spend
        more on dispatching its operations than on the arithmetic (the same float32 operations
        in the same order, so the same numbers).
        """
        hp = self.hp
        next_value = self.policy.get_value(self.next_obs).cpu().numpy()
        rewards, values = self.rewards.cpu().numpy(), self.values.cpu().numpy()
        not_dones = 1.0 - self.dones.cpu().numpy()
        advantages = np.zeros_like(rewards)
        last_gae = np.zeros(self.num_envs, dtype=np.float32)
        for t in reversed(range(hp.num_steps)):
            following = next_value if t == hp.num_steps - 1 else values[t + 1]
            delta = rewards[t] + hp.gamma * following * not_dones[t] - values[t]
            last_gae = delta + hp.gamma * hp.gae_lambda * not_dones[t] * last_gae
            advantages[t] = last_gae
        advantages_t = torch.from_numpy(advantages).to(self.device)
        return advantages_t, advantages_t + self.values

    # ------------------------------------------------------------------ learning
    @property
    def step(self) -> PPOStep:
        """The minibatch step ``ppo.compile`` asks for, built on first use (after any policy surgery)."""
        if self._step is None:
            with torch.inference_mode(False):  # the first rollout step may ask; the step's tensors need autograd
                self._step = make_step(self.hp.compile, self.policy, self.hp, self.device)
            self._params = list(self.policy.parameters())
            self._optim = ClipAndStep(self.optimizer, self._params)
        return self._step

    def _act(self, obs: torch.Tensor) -> ActOutput:
        """Sample actions for a rollout step through the step's own forward pass (the fused one where it runs)."""
        return self.step.act(obs)

    def _minibatch(
        self, chosen: Selection, tensors: tuple[torch.Tensor, ...], norm_adv: torch.Tensor | None
    ) -> Minibatch:
        """Gather one minibatch from the flattened rollout; advantages normalised as the selection says."""
        obs, actions, logprobs, advantages, returns, values = tensors
        if chosen.whole:
            adv = norm_adv if norm_adv is not None else advantages
            return Minibatch(obs, actions, logprobs, adv, returns, values, chosen.weights, chosen.denominator)
        idx = chosen.indices
        adv = advantages[idx]
        if self.hp.norm_adv:
            ref = chosen.norm_indices
            if ref is None:  # the rollout's statistics: the same whichever samples were kept
                adv = norm_adv[idx] if norm_adv is not None else adv
            elif len(ref) > 1:  # the minibatch's own statistics (SB3 and CleanRL do this)
                ref_adv = adv if ref is idx else advantages[ref]
                adv = (adv - ref_adv.mean()) / (ref_adv.std() + 1e-8)
        return Minibatch(
            obs[idx], actions[idx], logprobs[idx], adv, returns[idx], values[idx], chosen.weights, chosen.denominator
        )

    def learn(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """``update_epochs`` passes of minibatch SGD on the clipped surrogate objective."""
        hp = self.hp
        step = self.step
        clock = self.schedule or self
        progress_left = 1.0 - clock.update / clock.num_updates
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
        tensors = (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values)
        norm_adv = None  # the rollout's normalised advantages, for selections that ask for rollout statistics
        if hp.norm_adv and self.rollout_size > 1:
            norm_adv = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        stats: list[torch.Tensor] = []  # one row of detached scalars per minibatch, read once at the end
        stop = False
        for chosen in self.selector.plan(self.rollout_size, hp.batch_size, hp.update_epochs, self.global_step):
            k = len(chosen.indices)
            if k == 0:
                continue
            mb = self._minibatch(chosen, tensors, norm_adv)
            out = self.meter.run_counted("forward", lambda m=mb: step.forward(m, clip), k)
            self.meter.forward_samples += k
            if hp.target_kl is not None and out.stats[3] > 1.5 * hp.target_kl:
                stop = True
                break
            if not torch.isfinite(out.loss):
                raise TrainingDiverged(
                    f"PPO loss became {out.loss.item()} at update {clock.update + 1}; lower ppo.learning_rate "
                    "or turn on env.normalize_obs / env.normalize_reward"
                )

            self._optim.zero_grad()
            self.meter.run_counted("backward", lambda o=out: step.backward(o), k)
            self.meter.backward_samples += k
            self.gradient_sync(self._params)
            self._optim.step(hp.max_grad_norm)
            self.meter.optimizer_steps += 1
            stats.append(out.stats)

        means = torch.stack(stats).mean(0).tolist() if stats else [0.0] * len(STAT_NAMES)
        metrics = dict(zip(STAT_NAMES, means, strict=True))
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

    @property
    def techniques(self) -> list[str]:
        """The sample selector's technique, if any (PivotRL, random skipping, fewer epochs)."""
        return [self.selector.technique] if self.selector.technique else []

    def summary_extra(self) -> dict[str, Any]:
        """Keys this learner adds to summary.json: the minibatch step that ran (``ppo.compile`` resolved)."""
        return {"compile": self.step.mode}

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
