"""What DQN and SAC share: collecting into a replay store, the driving loop, hyperparameter control.

A subclass builds its networks and optimizers, then implements ``choose_actions`` (acting),
``learn`` (the gradient steps; metrics out, with its value loss under ``value_loss_key``) and
``optimizers`` (whose learning rate the controllers may change). This class does the rest:
``start``, ``collect`` (``train_freq`` steps of the N envs, every transition into the store),
``run_update`` (collect, then learn once ``learning_starts`` env steps have passed), episode
statistics, and after every update the score stages and the hyper controller.

Techniques are objects handed in, not flags checked in the loop: ``hyper`` (a
``HyperController``: fixed hyperparameters, or the RMT meta-controller with ``meta.kind: rmt``)
and ``gradient_sync`` (a ``GradientSync``: local, or the workers' fusion under torchrun).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from frugalrl.algos.base import LearnerBase
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.config import DQNConfig, ExperimentConfig, SACConfig
from frugalrl.cost import CostMeter
from frugalrl.meta import HyperController, ScoreStages, build_hyper_controller
from frugalrl.replay import ReplayStore, build_replay


def rmt_techniques(config: ExperimentConfig, hyper: HyperController) -> list[str]:
    """Names of the RMT parts a run uses (for ``summary.json``'s ``techniques``)."""
    parts = [] if config.replay.kind == "uniform" else [f"replay_{config.replay.kind}"]
    parts += [hyper.technique] if hyper.technique else []
    parts += ["boltzmann_exploration"] if config.algo == "dqn" and config.dqn.exploration == "boltzmann" else []
    parts += ["score_stages"] if config.score_stages.stages else []
    parts += [config.policy.block] if config.policy.block != "plain" else []  # fractal, or its residual control
    return parts


def adam(params: list[torch.nn.Parameter], lr: float, fused: bool) -> torch.optim.Adam:
    """Adam over ``params``; ``fused`` (``dqn.fused_adam`` / ``sac.fused_adam``) takes torch's fused kernel, one
    call per step for all of them, where it runs (float32 on the CPU or CUDA). At these network sizes the
    default per-parameter loop costs more than its arithmetic (docs/benchmarks.md, the off-policy sections)."""
    usable = fused and all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, fused=True) if usable else torch.optim.Adam(params, lr=lr)


def _single_precision(obs: np.ndarray) -> np.ndarray:
    """float64 observations (MuJoCo) as float32, the networks' dtype; others unchanged."""
    return obs.astype(np.float32) if obs.dtype == np.float64 else obs


class OffPolicyLearner(LearnerBase, ABC):
    value_loss_key = "loss"
    tunable = ("learning_rate", "gamma", "exploration")  # the controller's adjustments this learner takes

    def __init__(
        self,
        config: ExperimentConfig,
        hp: DQNConfig | SACConfig,
        env: gym.vector.VectorEnv,
        meter: CostMeter,
        device: torch.device,
        initial_exploration: float | None,
        *,
        gradient_sync: GradientSync = LOCAL_SYNC,
        hyper: HyperController | None = None,
    ):
        """``hyper`` defaults to the controller the config's ``meta`` section asks for."""
        self.config = config
        self.hp = hp
        self.env = env
        self.meter = meter
        self.device = device
        self.num_envs = env.num_envs
        self.replay: ReplayStore = build_replay(
            config.replay, env.single_observation_space, env.single_action_space, self.num_envs, config.seed
        )
        self.rng = np.random.default_rng(config.seed)
        self.rollout_size = self.num_envs * hp.train_freq
        self.num_updates = math.ceil(hp.total_timesteps / self.rollout_size)
        self.update = 0
        self.global_step = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.recent_lengths: deque[int] = deque(maxlen=100)
        self.next_obs: torch.Tensor | None = None
        self._obs_np: np.ndarray | None = None
        self.gamma = hp.gamma
        self.learning_rate = hp.learning_rate
        if hyper is None:
            hyper = build_hyper_controller(config.meta, self.learning_rate, self.gamma, initial_exploration)
        self.hyper: HyperController = hyper
        self.stages = ScoreStages(config.score_stages)
        self.techniques = rmt_techniques(config, self.hyper)
        self.gradient_sync = gradient_sync  # called after every backward(), before the optimizer step

    # ------------------------------------------------------------------ what a learner defines
    @abstractmethod
    def choose_actions(self, obs: np.ndarray) -> np.ndarray:
        """Actions for the N envs' observations (exploration included)."""

    @abstractmethod
    def learn(self) -> dict[str, float]:
        """``gradient_steps`` updates from the replay store; metrics, value loss under ``value_loss_key``."""

    @abstractmethod
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """Every optimizer whose learning rate the controllers set."""

    def acting_metrics(self) -> dict[str, float]:
        """Per-update figures of the acting side (epsilon, temperature, ...)."""
        return {}

    def exploration_signal(self, metrics: dict[str, float]) -> float | None:
        """The entropy the hyper controller watches."""
        return None

    def episodes_ended(self, returns: list[float]) -> None:
        """Called with the training returns of the episodes that ended at this env step (``global_step``
        counts it already); a subclass that keeps a learning curve of its own overrides it."""

    # ------------------------------------------------------------------ the loop
    def seed_sampling(self, seed: int) -> None:
        """This worker's own exploration and replay-sampling stream (multi-worker runs)."""
        self.rng = np.random.default_rng(seed)

    def start(self, seed: int) -> None:
        obs, _ = self.env.reset(seed=seed)
        self._obs_np = _single_precision(obs)
        self.next_obs = torch.as_tensor(obs, device=self.device)

    def collect(self) -> None:
        """``train_freq`` steps of every env, each transition into the replay store."""
        for _ in range(self.hp.train_freq):
            obs = self._obs_np
            with self.meter.timed("act"):
                actions = self.choose_actions(obs)
            with self.meter.timed("env"):
                next_obs, rewards, terminated, truncated, info = self.env.step(actions)
            self.meter.real_env_steps += self.num_envs
            self.global_step += self.num_envs
            self.replay.add(obs, actions, rewards, terminated, truncated, next_obs, info.get("final_obs"))
            self._obs_np = _single_precision(next_obs)
            if "_episode" in info:
                ended = info["_episode"]
                returns = info["episode"]["r"][ended].tolist()
                self.recent_returns.extend(returns)
                self.recent_lengths.extend(info["episode"]["l"][ended].tolist())
                self.episodes_ended(returns)
        self.next_obs = torch.as_tensor(self._obs_np, device=self.device)

    def run_update(self) -> dict[str, float]:
        if self.next_obs is None:
            raise RuntimeError("call start(seed) before run_update()")
        self.collect()
        metrics: dict[str, float] = {}
        if self.global_step >= self.hp.learning_starts:
            with self.meter.timed("learn"):
                metrics.update(self.learn())
        self.update += 1
        if self.recent_returns:
            metrics["episode_return"] = float(np.mean(self.recent_returns))
            metrics["episode_length"] = float(np.mean(self.recent_lengths))
        self.control(metrics)
        metrics.update(self.acting_metrics())
        stats = self.replay.stats()
        metrics.update({k: v for k, v in stats.items() if isinstance(v, int | float) and not isinstance(v, bool)})
        return metrics

    # ------------------------------------------------------------------ hyperparameter control
    def control(self, metrics: dict[str, float]) -> None:
        """Score stages and the hyper controller look at this update and may change lr / gamma / exploration."""
        changes = self.stages.observe(metrics.get("episode_return"), self.learning_rate, self.gamma)
        value_loss = metrics.get(self.value_loss_key)  # None until learning starts
        decided = self.hyper.adjust(changes, self.exploration_signal(metrics), value_loss)
        changes += [c for c in decided if c.name in self.tunable]
        for change in changes:
            if change.name == "learning_rate":
                self.learning_rate = change.new
                for optimizer in self.optimizers():
                    for group in optimizer.param_groups:
                        group["lr"] = change.new
            elif change.name == "gamma":
                self.gamma = change.new
            print(f"step {self.global_step}: {change.line()}")
        metrics.update(learning_rate=self.learning_rate, gamma=self.gamma)
        metrics.update(self.hyper.metrics())

    # ------------------------------------------------------------------ state
    def base_state(self) -> dict[str, Any]:
        """The loop's state (subclasses add their networks and optimizers); the replay store is not
        included, so a resumed run refills it."""
        return {
            "update": self.update,
            "global_step": self.global_step,
            "next_obs": self.next_obs,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "gamma": self.gamma,
            "learning_rate": self.learning_rate,
            "meta": self.hyper.state_dict(),
            "stages_passed": self.stages.passed,
        }

    def load_base_state(self, state: dict[str, Any]) -> None:
        self.update = int(state["update"])
        self.global_step = int(state["global_step"])
        self.next_obs = state["next_obs"].to(self.device)
        self._obs_np = self.next_obs.cpu().numpy()
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])
        self.gamma, self.learning_rate = float(state["gamma"]), float(state["learning_rate"])
        self.hyper.load_state_dict(state["meta"])
        self.stages.passed = int(state["stages_passed"])
