"""The hyperparameters of each learning algorithm: ``ppo``, ``dqn`` and ``sac``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from frugalrl.config._base import _seam_registry, _Strict


class PPOConfig(_Strict):
    """PPO hyperparameters (names as in CleanRL; ``batch_size`` is the minibatch size)."""

    total_timesteps: int = Field(100_000, ge=1)
    num_steps: int = Field(32, ge=1, description="rollout length per env")
    batch_size: int = Field(256, ge=1, description="minibatch size")
    update_epochs: int = Field(20, ge=1)
    learning_rate: float = Field(1e-3, gt=0, le=1.0)
    anneal_lr: bool = True
    clip_coef: float = Field(0.2, gt=0, le=1.0)
    anneal_clip: bool = True
    clip_vloss: bool = False
    gamma: float = Field(0.98, ge=0.0, le=1.0)
    gae_lambda: float = Field(0.8, ge=0.0, le=1.0)
    ent_coef: float = Field(0.0, ge=0.0)
    vf_coef: float = Field(0.5, ge=0.0)
    max_grad_norm: float = Field(0.5, gt=0)
    target_kl: float | None = Field(None, gt=0)
    norm_adv: bool = True
    adam_eps: float = Field(1e-5, gt=0)
    compile: str = Field(
        "auto",
        description="the minibatch step, a registered kind (frugalrl.algos.step_kinds): fused (hand-written MLP "
        "forward/backward), inductor (torch.compile), off (eager autograd); auto = on the CPU fused where the "
        "policy allows, else off",
    )

    @field_validator("compile", mode="before")
    @classmethod
    def _yaml_switch(cls, value: Any) -> Any:
        # YAML reads a bare `off` / `on` as a boolean: off is eager, on the fused step.
        if isinstance(value, bool):
            return "fused" if value else "off"
        return {"on": "fused"}.get(value, value) if isinstance(value, str) else value

    @field_validator("compile")
    @classmethod
    def _registered_step(cls, kind: str) -> str:
        _seam_registry("ppo").entry(kind)  # the registry imports its package's modules on first use
        return kind


class DQNConfig(_Strict):
    """Double DQN (van Hasselt et al. 2016) hyperparameters, named as in Stable-Baselines3."""

    total_timesteps: int = Field(50_000, ge=1)
    learning_rate: float = Field(1e-4, gt=0, le=1.0)
    batch_size: int = Field(64, ge=1)
    learning_starts: int = Field(1000, ge=0, description="env steps of pure exploration before learning")
    train_freq: int = Field(4, ge=1, description="vector-env steps between learning phases")
    gradient_steps: int = Field(1, ge=1, description="minibatch updates per learning phase")
    gamma: float = Field(0.99, ge=0.0, le=1.0)
    target_update_interval: int = Field(1000, ge=1, description="env steps between target-network syncs")
    tau: float = Field(1.0, gt=0.0, le=1.0, description="1 = hard copy; below 1 = Polyak averaging")
    exploration_fraction: float = Field(0.1, gt=0.0, le=1.0)
    exploration_initial_eps: float = Field(1.0, ge=0.0, le=1.0)
    exploration_final_eps: float = Field(0.05, ge=0.0, le=1.0)
    exploration: Literal["epsilon", "boltzmann"] = Field(
        "epsilon", description="boltzmann: epsilon-greedy mixed with softmax(Q / T), T following the Q entropy"
    )
    temperature_bounds: tuple[float, float] = Field((0.01, 1.0), description="boltzmann temperature range")
    max_grad_norm: float = Field(10.0, gt=0)
    double: bool = True


class SACConfig(_Strict):
    """Soft Actor-Critic (Haarnoja et al. 2018) with twin critics and automatic entropy tuning."""

    total_timesteps: int = Field(20_000, ge=1)
    learning_rate: float = Field(1e-3, gt=0, le=1.0, description="actor, critics and temperature")
    batch_size: int = Field(256, ge=1)
    learning_starts: int = Field(100, ge=0)
    train_freq: int = Field(1, ge=1, description="vector-env steps between learning phases")
    gradient_steps: int = Field(1, ge=1)
    gamma: float = Field(0.99, ge=0.0, le=1.0)
    tau: float = Field(0.005, gt=0.0, le=1.0, description="Polyak averaging of the target critics")
    ent_coef: float | Literal["auto"] = Field("auto", description="a fixed temperature, or auto-tuned")
    target_entropy: float | Literal["auto"] = Field("auto", description="auto = -action_dim")
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
