"""Soft Actor-Critic (Haarnoja et al. 2018) for continuous actions, top to bottom.

One ``run_update()`` = ``train_freq`` steps of the N vector envs (the squashed-Gaussian policy
samples; pure random actions before ``learning_starts``), then ``gradient_steps`` updates of:

1. the twin critics toward r + gamma * (min_j Q'_j(s', a') - alpha * log pi(a'|s')), a' ~ pi(s');
2. the actor, minimising alpha * log pi(a|s) - min_j Q_j(s, a), a ~ pi(s) (reparameterised);
3. the temperature alpha (``ent_coef: auto``), driving the policy entropy toward
   ``target_entropy`` (default -action_dim);
4. the target critics, Polyak-averaged with ``tau``.

The passes of 1. and 2. run through a ``SACStep`` (``frugalrl.algos.sac_step``): written out without
autograd for plain-MLP networks (``sac.fused_step``), else autograd's. Replay priorities use the mean TD
error of the two critics. The meta-controller and score stages (as in DQN) may change lr and gamma;
exploration is the temperature's job, so the controller's exploration rule is not used here. Names follow
Stable-Baselines3.
Shapes: N = num_envs, B = batch_size, D = action dimension.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.offpolicy import OffPolicyLearner, adam
from frugalrl.algos.optim_step import ClipAndStep
from frugalrl.algos.sac_step import SACStep, build_sac_step
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.errors import TrainingDiverged
from frugalrl.meta import HyperController
from frugalrl.nets.policy import ActOutput
from frugalrl.nets.torsos import MLP, default_init


class SquashedGaussianActor(nn.Module):
    """obs -> tanh(Normal(mean, std)) rescaled to the action bounds; the policy that gets exported."""

    discrete = False

    def __init__(
        self, obs_dim: int, action_space: gym.spaces.Box, hidden: list[int], log_std_bounds: tuple, block: str = "plain"
    ):
        super().__init__()
        self.torso = MLP(obs_dim, hidden, "relu", block)
        dim = int(np.prod(action_space.shape))
        self.mean = nn.Linear(self.torso.out_dim, dim)
        self.log_std = nn.Linear(self.torso.out_dim, dim)
        self.log_std_bounds = log_std_bounds
        low, high = torch.as_tensor(action_space.low), torch.as_tensor(action_space.high)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)

    def _draw(self, obs: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pre-tanh action (B, D), the Gaussian's mean and its clamped log-std."""
        h = self.torso(obs)
        mean = self.mean(h)
        log_std = self.log_std(h).clamp(*self.log_std_bounds)
        pre = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
        return pre, mean, log_std

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions in the env's bounds (B, D) and their log-probabilities (B,)."""
        pre, mean, log_std = self._draw(obs, deterministic)
        # The operations in this order: autograd sums ``pre``'s gradients in the order they were recorded, and
        # a run's numbers (benchmarks/summary_equivalence.py) hold only while that order does.
        squashed = torch.tanh(pre)
        gaussian = -0.5 * (((pre - mean) / log_std.exp()) ** 2) - log_std - 0.5 * math.log(2 * math.pi)
        # Change of variables through tanh and the rescaling (numerically stable form of log(1 - tanh^2)).
        correction = 2 * (math.log(2) - pre - F.softplus(-2 * pre)) + torch.log(self.scale)
        return squashed * self.scale + self.bias, (gaussian - correction).sum(-1)

    def sample_action(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``sample``'s actions alone, from the same random draw: acting and serving skip the log-probability."""
        return torch.tanh(self._draw(obs, deterministic)[0]) * self.scale + self.bias

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> ActOutput:
        action, logprob = self.sample(obs, deterministic)
        zeros = torch.zeros_like(logprob)  # (B,), and the batch size stays symbolic in torch.export
        return ActOutput(action, logprob, zeros, action)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.sample_action(obs, deterministic=True)


class TwinCritic(nn.Module):
    """Two independent Q(s, a) networks."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], block: str = "plain"):
        super().__init__()
        self.q1 = nn.Sequential(MLP(obs_dim + action_dim, hidden, "relu", block), nn.Linear(hidden[-1], 1))
        self.q2 = nn.Sequential(MLP(obs_dim + action_dim, hidden, "relu", block), nn.Linear(hidden[-1], 1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([obs.flatten(1), action], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def build_sac_actor(
    obs_space: gym.spaces.Box, action_space: gym.Space, config: ExperimentConfig
) -> SquashedGaussianActor:
    if not isinstance(action_space, gym.spaces.Box):
        raise ValueError(f"SAC needs a continuous (Box) action space, got {action_space}; use algo dqn or ppo")
    actor = SquashedGaussianActor(
        int(np.prod(obs_space.shape)),
        action_space,
        config.policy.hidden,
        config.sac.log_std_bounds,
        config.policy.block,
    )
    return actor if config.policy.ortho_init else default_init(actor)


@dataclass
class SACNetworks:
    """What SAC learns with: the actor, the twin critics and (optionally) a starting log-temperature.

    The learner's optimizers step the parameters that require gradients: every one of fresh networks
    (``build``), only the adapters of networks a PEFT method adapted (``frugalrl.peft.finetune``)."""

    actor: SquashedGaussianActor
    critic: TwinCritic
    log_alpha: torch.Tensor | None = None  # None: 0, or log(ent_coef) when the temperature is fixed

    @classmethod
    def build(cls, obs_space: gym.spaces.Box, action_space: gym.Space, config: ExperimentConfig) -> SACNetworks:
        actor = build_sac_actor(obs_space, action_space, config)
        obs_dim, action_dim = int(np.prod(obs_space.shape)), int(np.prod(action_space.shape))
        critic = TwinCritic(obs_dim, action_dim, config.policy.hidden, config.policy.block)
        if not config.policy.ortho_init:
            default_init(critic)
        return cls(actor, critic)


def _trainable(module: nn.Module) -> list[nn.Parameter]:
    return [p for p in module.parameters() if p.requires_grad]


class SAC(OffPolicyLearner):
    """The SAC learner; the same driving interface as ``PPO`` and ``DQN``."""

    value_loss_key = "critic_loss"
    tunable = ("learning_rate", "gamma")  # the temperature tunes exploration itself

    def __init__(
        self,
        config: ExperimentConfig,
        env: gym.vector.VectorEnv,
        meter: CostMeter,
        device: torch.device,
        *,
        gradient_sync: GradientSync = LOCAL_SYNC,
        hyper: HyperController | None = None,
        networks: SACNetworks | None = None,
    ):
        """``networks`` (default: fresh ones, ``SACNetworks.build``) are what it learns with."""
        super().__init__(
            config,
            config.sac,
            env,
            meter,
            device,
            initial_exploration=None,  # the temperature explores; a controller starts at its own lower bound
            gradient_sync=gradient_sync,
            hyper=hyper,
        )
        obs_space, action_space = env.single_observation_space, env.single_action_space
        networks = networks or SACNetworks.build(obs_space, action_space, config)
        self.policy = networks.actor.to(device)
        self.action_dim = int(np.prod(action_space.shape))
        self.critic = networks.critic.to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # the three passes of a gradient step: written out for plain MLPs (sac.fused_step), else autograd's
        self.step: SACStep = build_sac_step(self.policy, self.critic, self.critic_target, self.hp.fused_step)
        # the target update's pairs, in place all at once (torch._foreach_lerp_)
        self._target_pairs = (list(self.critic_target.parameters()), list(self.critic.parameters()))
        critic_weights = _trainable(self.critic)
        self.actor_optimizer = adam(_trainable(self.policy), self.hp.learning_rate, self.hp.fused_adam)
        self.critic_optimizer = adam(critic_weights, self.hp.learning_rate, self.hp.fused_adam)
        # the same Adam updates without torch.optim's per-call plumbing (frugalrl.algos.optim_step)
        self.actor_update = ClipAndStep(self.actor_optimizer, _trainable(self.policy))
        self.critic_update = ClipAndStep(self.critic_optimizer, critic_weights)
        self.auto_alpha = self.hp.ent_coef == "auto"
        self.log_alpha = torch.zeros(1, device=device, requires_grad=self.auto_alpha)
        if networks.log_alpha is not None:
            self.log_alpha.data.copy_(networks.log_alpha)
        elif not self.auto_alpha:
            self.log_alpha.data.fill_(math.log(float(self.hp.ent_coef)))
        target = self.hp.target_entropy
        self.target_entropy = -float(self.action_dim) if target == "auto" else float(target)
        self.alpha_optimizer = adam([self.log_alpha], self.hp.learning_rate, self.hp.fused_adam)
        self.alpha_update = ClipAndStep(self.alpha_optimizer, [self.log_alpha])
        self.action_space = action_space

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer]

    def exploration_signal(self, metrics: dict[str, float]) -> float | None:
        return metrics.get("entropy")

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def choose_actions(self, obs: np.ndarray) -> np.ndarray:
        if self.global_step < self.hp.learning_starts:  # uniform random actions first, as SB3
            low, high = self.action_space.low, self.action_space.high
            return self.rng.uniform(low, high, size=(self.num_envs, *self.action_space.shape)).astype(np.float32)
        action = self.meter.run_counted(
            "act", lambda: self.policy.sample_action(torch.as_tensor(obs, device=self.device)), self.num_envs
        )
        self.meter.inference_samples += self.num_envs
        return action.cpu().numpy()

    # ------------------------------------------------------------------ learning
    def learn(self) -> dict[str, float]:
        stats = torch.stack([self._gradient_step() for _ in range(self.hp.gradient_steps)])
        names = ("critic_loss", "actor_loss", "alpha", "entropy")
        return dict(zip(names, stats.mean(0).tolist(), strict=True))

    def _gradient_step(self) -> torch.Tensor:
        """One minibatch update of the critics, the actor, the temperature and the targets; its statistics."""
        bs, step = self.hp.batch_size, self.step
        batch = self.replay.sample(bs)
        obs = torch.as_tensor(batch.obs, device=self.device)
        actions = torch.as_tensor(batch.actions, device=self.device).reshape(bs, self.action_dim)
        rewards = torch.as_tensor(batch.rewards, device=self.device)
        next_obs = torch.as_tensor(batch.next_obs, device=self.device)
        terminated = torch.as_tensor(batch.terminated, device=self.device)
        weights = torch.as_tensor(batch.weights, device=self.device)
        alpha = self.log_alpha.exp().detach()

        targets = self.meter.run_counted(
            "target", lambda: step.targets(next_obs, rewards, terminated, self.gamma, alpha), bs
        )
        self.meter.count("target", bs)
        q1, q2 = self.meter.run_counted("forward", lambda: step.critic_forward(obs, actions), bs)
        critic_loss = (weights * ((q1 - targets) ** 2 + (q2 - targets) ** 2)).mean() / 2
        self.critic_update.zero_grad()
        self.meter.run_counted("backward", lambda: step.critic_backward(critic_loss, q1, q2, targets, weights), bs)
        self.gradient_sync(self.critic.parameters(), "critic")
        self.critic_update.step(None)
        self.meter.optimizer_steps += 1  # one per gradient update (critic, then the delayed actor and alpha)

        def actor_step() -> tuple[torch.Tensor, torch.Tensor]:
            self.actor_update.zero_grad()
            loss, logprob = step.actor_backward(obs, alpha)
            self.gradient_sync(self.policy.parameters(), "actor")
            self.actor_update.step(None)
            return loss, logprob

        actor_loss, logprob = self.meter.run_counted("actor", actor_step, bs)
        self.meter.count("actor", bs)  # the actor's forward and backward (critic forward included)
        self.meter.forward_samples += bs
        self.meter.backward_samples += bs
        if self.auto_alpha:
            alpha_loss = -(self.log_alpha * (logprob + self.target_entropy)).mean()
            self.alpha_update.zero_grad()
            alpha_loss.backward()
            self.gradient_sync([self.log_alpha], "temperature")
            self.alpha_update.step(None)
        with torch.no_grad():
            torch._foreach_lerp_(*self._target_pairs, self.hp.tau)  # each target.lerp_(online, tau), in one call
        if not torch.isfinite(critic_loss):
            raise TrainingDiverged(
                f"SAC critic loss became {critic_loss.item()} at update {self.update + 1}; "
                "lower sac.learning_rate or turn on env.normalize_reward"
            )
        td = ((q1 - targets).abs() + (q2 - targets).abs()).detach() / 2
        self.replay.update_priorities(batch.indices, td.cpu().numpy())
        return torch.stack([critic_loss.detach(), actor_loss, self.log_alpha.exp().detach()[0], -logprob.mean()])

    def summary_extra(self) -> dict[str, Any]:
        """Final replay statistics, temperature and hyperparameters, for summary.json."""
        lr = self.critic_optimizer.param_groups[0]["lr"]
        alpha = float(self.log_alpha.detach().exp())
        return {**self.replay.stats(), "final_learning_rate": lr, "final_gamma": self.gamma, "final_alpha": alpha}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            **self.base_state(),
            "policy": self.policy.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.load_base_state(state)
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.log_alpha.data.copy_(state["log_alpha"])
