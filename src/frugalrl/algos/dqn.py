"""Double DQN with a target network (Mnih et al. 2015; van Hasselt et al. 2016), top to bottom.

One ``run_update()`` = ``train_freq`` steps of the N vector envs (epsilon-greedy, each
transition into the replay store), then ``gradient_steps`` minibatch updates once
``learning_starts`` env steps have passed. The loss is the Huber loss between Q(s, a) and
r + gamma * Q_target(s', argmax_a' Q(s', a')) (Double DQN; plain DQN takes the target's max),
weighted by the replay's importance weights; the new |TD errors| go back to the store as
priorities. The target network is synced every ``target_update_interval`` env steps (or
Polyak-averaged with ``tau < 1``). Truncated episodes bootstrap from their final observation.
The forward and backward pass on Q(s, a) are ``dqn_step``'s: autograd, or for a plain MLP the same
step written out (``dqn.fused_step``, the same gradients bit for bit).

Optional parts of the RMT seed, each off by default and each one object handed in or built
from its config section (the loop has no technique flags):
``replay.kind`` (prioritized or hot/warm/cold tiers), ``dqn.exploration: boltzmann``
(epsilon-greedy mixed with softmax(Q / T), the temperature following the entropy of softmax(Q)),
``meta.kind: rmt`` (the meta-controller nudging lr, gamma and epsilon: ``frugalrl.meta.hyper``),
``score_stages`` (lr and
gamma switched at return thresholds) and ``policy.block: fractal``. With all of them off this
is plain Double DQN, parameter for parameter.

Names follow Stable-Baselines3 so RL Zoo hyperparameters mean the same thing here.
Shapes: N = num_envs, B = batch_size, A = number of actions.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from frugalrl.algos.dqn_step import QStep, build_q_step
from frugalrl.algos.exploration import ActionRule, EpsilonSchedule, build_action_rule, entropy_watch
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.offpolicy import OffPolicyLearner, adam
from frugalrl.algos.optim_step import ClipAndStep
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.errors import TrainingDiverged
from frugalrl.meta import HyperController
from frugalrl.nets.qnet import QNetwork, build_q_network


class DQN(OffPolicyLearner):
    """The DQN learner; the same driving interface as ``PPO`` (``start``, ``run_update``, state)."""

    def __init__(
        self,
        config: ExperimentConfig,
        env: gym.vector.VectorEnv,
        meter: CostMeter,
        device: torch.device,
        *,
        gradient_sync: GradientSync = LOCAL_SYNC,
        hyper: HyperController | None = None,
        action_rule: ActionRule | None = None,
    ):
        """``hyper`` and ``action_rule`` default to what the config's ``meta`` and ``dqn.exploration`` say."""
        super().__init__(
            config,
            config.dqn,
            env,
            meter,
            device,
            initial_exploration=config.dqn.exploration_final_eps,
            gradient_sync=gradient_sync,
            hyper=hyper,
        )
        self.epsilon_schedule = EpsilonSchedule(self.hp)
        self.action_rule: ActionRule = action_rule if action_rule is not None else build_action_rule(self.hp)
        # the entropy of softmax(Q) is measured only when the action rule or the controller reads it
        self.q_watch = entropy_watch(self.action_rule, self.hyper)
        self.policy: QNetwork = build_q_network(env.single_observation_space, env.single_action_space, config.policy)
        self.policy.to(device)
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.optimizer = adam(list(self.policy.parameters()), self.hp.learning_rate, self.hp.fused_adam)
        self.clip_and_step = ClipAndStep(self.optimizer, list(self.policy.parameters()))
        self.q_step: QStep = build_q_step(self.policy, self.hp.fused_step)
        self.gradient_updates = 0
        self.last_target_sync = 0

    @property
    def q_entropy(self) -> float | None:
        """Running normalised entropy of softmax(Q) on acted states; None when nobody reads it."""
        return self.q_watch.value

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer]

    # ------------------------------------------------------------------ acting
    def epsilon(self) -> float:
        """Linear decay over ``exploration_fraction`` of the budget; afterwards the final value
        (or the hyper controller's, when it has one)."""
        return self.epsilon_schedule(self.global_step, self.hyper.exploration)

    def temperature(self) -> float:
        """Boltzmann temperature: high while softmax(Q) is flat (Q values undecided), low once peaked."""
        low, high = self.hp.temperature_bounds
        return low + (high - low) * (1.0 if self.q_entropy is None else self.q_entropy)

    @torch.no_grad()
    def choose_actions(self, obs: np.ndarray) -> np.ndarray:
        """Epsilon-greedy over the N envs; the action rule picks the non-random actions (the argmax,
        or with ``exploration: boltzmann`` a sample from softmax(Q / T))."""
        q = self.meter.run_counted("act", lambda: self.policy(torch.as_tensor(obs, device=self.device)), self.num_envs)
        self.meter.inference_samples += self.num_envs
        self.q_watch.observe(q)
        actions = self.action_rule(q, self.temperature(), self.rng)
        explore = self.rng.random(self.num_envs) < self.epsilon()
        actions[explore] = self.rng.integers(0, self.policy.num_actions, size=int(explore.sum()))
        return actions

    # ------------------------------------------------------------------ learning
    def td_targets(self, rewards: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        """r + gamma * Q_target(s', a*) with a* from the online net (Double DQN) or the target's max."""
        with torch.no_grad():
            next_q_target = self.target(next_obs)  # (B, A)
            if self.hp.double:
                best = self.policy(next_obs).argmax(-1, keepdim=True)
                next_value = next_q_target.gather(1, best).squeeze(1)
            else:
                next_value = next_q_target.max(-1).values
            return rewards + self.gamma * (1.0 - terminated) * next_value

    def learn(self) -> dict[str, float]:
        hp = self.hp
        losses, q_means = [], []
        for _ in range(hp.gradient_steps):
            batch = self.replay.sample(hp.batch_size)
            obs = torch.as_tensor(batch.obs, device=self.device)
            actions = torch.as_tensor(batch.actions, device=self.device).long()
            rewards = torch.as_tensor(batch.rewards, device=self.device)
            next_obs = torch.as_tensor(batch.next_obs, device=self.device)
            terminated = torch.as_tensor(batch.terminated, device=self.device)
            weights = torch.as_tensor(batch.weights, device=self.device)
            targets = self.meter.run_counted(
                "target", lambda r=rewards, n=next_obs, d=terminated: self.td_targets(r, n, d), hp.batch_size
            )
            self.meter.count("target", hp.batch_size)
            q = self.meter.run_counted("forward", lambda o=obs, a=actions: self.q_step.forward(o, a), hp.batch_size)
            self.meter.forward_samples += hp.batch_size
            td = q - targets
            loss = (weights * F.smooth_l1_loss(q, targets, reduction="none")).mean()
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"DQN loss became {loss.item()} at update {self.update + 1}; lower dqn.learning_rate "
                    "or turn on env.normalize_reward"
                )
            self.clip_and_step.zero_grad()
            self.meter.run_counted(
                "backward",
                lambda lo=loss, q_=q, t=targets, w=weights: self.q_step.backward(lo, q_, t, w),
                hp.batch_size,
            )
            self.meter.backward_samples += hp.batch_size
            self.gradient_sync(self.policy.parameters())
            self.clip_and_step.step(hp.max_grad_norm)  # clip_grad_norm_ then Adam, the same numbers in fewer calls
            self.meter.optimizer_steps += 1
            self.replay.update_priorities(batch.indices, td.detach().cpu().numpy())
            self.gradient_updates += 1
            losses.append(loss.detach())
            q_means.append(q.detach().mean())
            if hp.tau < 1.0:
                self._polyak(hp.tau)
        if hp.tau == 1.0 and self.global_step - self.last_target_sync >= hp.target_update_interval:
            self.target.load_state_dict(self.policy.state_dict())
            self.last_target_sync = self.global_step
        return {"loss": float(torch.stack(losses).mean()), "q_mean": float(torch.stack(q_means).mean())}

    @torch.no_grad()
    def _polyak(self, tau: float) -> None:
        torch._foreach_lerp_(list(self.target.parameters()), list(self.policy.parameters()), tau)

    def acting_metrics(self) -> dict[str, float]:
        metrics = {"epsilon": self.epsilon()}
        if self.q_entropy is not None:
            metrics.update(q_entropy=self.q_entropy, temperature=self.temperature())
        return metrics

    def exploration_signal(self, metrics: dict[str, float]) -> float | None:
        return self.q_entropy

    def summary_extra(self) -> dict[str, Any]:
        """Final replay statistics and hyperparameters, for summary.json."""
        final = {"final_learning_rate": self.learning_rate, "final_gamma": self.gamma, "final_epsilon": self.epsilon()}
        return {**self.replay.stats(), **final, "gradient_updates": self.gradient_updates}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            **self.base_state(),
            "policy": self.policy.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "gradient_updates": self.gradient_updates,
            "last_target_sync": self.last_target_sync,
            "q_entropy": self.q_entropy,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.load_base_state(state)
        self.policy.load_state_dict(state["policy"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.gradient_updates = int(state["gradient_updates"])
        self.last_target_sync = int(state["last_target_sync"])
        self.q_watch.value = state["q_entropy"]
