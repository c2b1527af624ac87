"""The hyperparameters of each learning algorithm: ``ppo``, ``dqn`` and ``sac``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from frugalrl.config._base import _seam_registry, _Strict


class PPOConfig(_Strict):
    """PPO hyperparameters (names as in CleanRL; ``batch_size`` is the minibatch size)."""

    total_timesteps: int = Field(
        100_000, ge=1, description="env steps to train for, all envs together (total_real_steps may set it)"
    )
    num_steps: int = Field(
        32, ge=1, description="env steps each env takes per rollout: an update learns from num_envs * num_steps samples"
    )
    batch_size: int = Field(
        256, ge=1, description="minibatch size in samples (as SB3's batch_size); at most env.num_envs * ppo.num_steps"
    )
    update_epochs: int = Field(
        20, ge=1, description="passes over each rollout per update; fewer cost less compute per env step, reuse less"
    )
    learning_rate: float = Field(
        1e-3, gt=0, le=1.0, description="Adam's step size at the start (decays linearly to 0 with anneal_lr)"
    )
    anneal_lr: bool = Field(True, description="decay learning_rate linearly to 0 over the run; false keeps it fixed")
    clip_coef: float = Field(
        0.2, gt=0, le=1.0, description="the clip range of the policy's probability ratio (0.1 to 0.3 is usual)"
    )
    anneal_clip: bool = Field(True, description="decay clip_coef linearly to 0 over the run; false keeps it fixed")
    clip_vloss: bool = Field(
        False,
        description="value loss: the larger of the plain error and that of the new value clipped to within clip_coef "
        "of the rollout's",
    )
    gamma: float = Field(
        0.98, ge=0.0, le=1.0, description="discount per env step; raise it towards 1 for long-horizon rewards"
    )
    gae_lambda: float = Field(
        0.8, ge=0.0, le=1.0, description="GAE's lambda: 0 = one-step TD advantages (biased), 1 = Monte Carlo (noisy)"
    )
    ent_coef: float = Field(
        0.0, ge=0.0, description="weight of the entropy bonus; raise it (e.g. 0.01) if the policy stops exploring early"
    )
    vf_coef: float = Field(0.5, ge=0.0, description="weight of the value loss (a plain MSE) beside the policy loss")
    max_grad_norm: float = Field(
        0.5, gt=0, description="the gradient's global norm is clipped to this before each step"
    )
    target_kl: float | None = Field(
        None, gt=0, description="stop an update's epochs once the approximate KL exceeds 1.5 x this; null = never"
    )
    norm_adv: bool = Field(True, description="normalise the advantages to mean 0 and std 1 over each rollout")
    adam_eps: float = Field(1e-5, gt=0, description="Adam's epsilon, the floor of its denominator")
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

    total_timesteps: int = Field(
        50_000, ge=1, description="env steps to train for, all envs together (total_real_steps may set it)"
    )
    learning_rate: float = Field(1e-4, gt=0, le=1.0, description="Adam's step size for the Q-network")
    batch_size: int = Field(64, ge=1, description="transitions per minibatch, sampled from the replay store")
    learning_starts: int = Field(
        1000, ge=0, description="env steps collected (epsilon-greedy, as scheduled) before learning starts"
    )
    train_freq: int = Field(4, ge=1, description="vector-env steps between learning phases")
    gradient_steps: int = Field(1, ge=1, description="minibatch updates per learning phase")
    gamma: float = Field(
        0.99, ge=0.0, le=1.0, description="discount per env step; raise it towards 1 for long-horizon rewards"
    )
    target_update_interval: int = Field(
        1000, ge=1, description="env steps between updates of the target network (see tau)"
    )
    tau: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="target-network update: 1 = a hard copy, below 1 = Polyak averaging by this weight",
    )
    exploration_fraction: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description="share of total_timesteps over which epsilon decays linearly to its final value",
    )
    exploration_initial_eps: float = Field(
        1.0, ge=0.0, le=1.0, description="epsilon (the probability of a random action) at the start"
    )
    exploration_final_eps: float = Field(
        0.05, ge=0.0, le=1.0, description="epsilon once its decay is over (meta.kind rmt may move it from there)"
    )
    exploration: Literal["epsilon", "boltzmann"] = Field(
        "epsilon",
        description="epsilon: epsilon-greedy; boltzmann: epsilon-greedy mixed with softmax(Q / T), T following the "
        "Q entropy",
    )
    temperature_bounds: tuple[float, float] = Field(
        (0.01, 1.0), description="exploration boltzmann: the softmax temperature's lowest and highest values"
    )
    max_grad_norm: float = Field(
        10.0, gt=0, description="the gradient's global norm is clipped to this before each step"
    )
    double: bool = Field(
        True, description="Double DQN's target (the online net picks the action, the target net values it); false = max"
    )
    fused_adam: bool = Field(
        True,
        description="Adam's fused kernel, one call for all parameters (faster on the CPU; numbers differ from torch's "
        "default Adam in the last bits); false: torch's default Adam, the reference",
    )
    fused_step: bool = Field(
        True,
        description="a plain-MLP Q-network's gradient step written out without autograd (faster on the CPU; the "
        "same gradients bit for bit); false, or another network: autograd, the reference",
    )


class SACConfig(_Strict):
    """Soft Actor-Critic (Haarnoja et al. 2018) with twin critics and automatic entropy tuning."""

    total_timesteps: int = Field(
        20_000, ge=1, description="env steps to train for, all envs together (total_real_steps may set it)"
    )
    learning_rate: float = Field(
        1e-3, gt=0, le=1.0, description="Adam's step size for the actor, the critics and the temperature"
    )
    batch_size: int = Field(256, ge=1, description="transitions per minibatch, sampled from the replay store")
    learning_starts: int = Field(100, ge=0, description="env steps of random actions before learning starts")
    train_freq: int = Field(1, ge=1, description="vector-env steps between learning phases")
    gradient_steps: int = Field(1, ge=1, description="minibatch updates per learning phase")
    gamma: float = Field(
        0.99, ge=0.0, le=1.0, description="discount per env step; raise it towards 1 for long-horizon rewards"
    )
    tau: float = Field(
        0.005,
        gt=0.0,
        le=1.0,
        description="the target critics move this share towards the critics after each update (Polyak averaging)",
    )
    ent_coef: float | Literal["auto"] = Field(
        "auto", description="the entropy temperature: a fixed number, or auto (tuned towards target_entropy)"
    )
    target_entropy: float | Literal["auto"] = Field(
        "auto", description="ent_coef auto: the entropy the temperature is tuned towards; auto = -(action dimensions)"
    )
    log_std_bounds: tuple[float, float] = Field(
        (-20.0, 2.0), description="the actor's log standard deviation is clamped to this range"
    )
    fused_adam: bool = Field(
        True,
        description="Adam's fused kernel, one call for all parameters (faster on the CPU; numbers differ from torch's "
        "default Adam in the last bits); false: torch's default Adam, the reference",
    )
    fused_step: bool = Field(
        True,
        description="plain-MLP networks' gradient steps written out without autograd, the twin critics batched (faster "
        "on the CPU; the same gradients up to float rounding); false, or other networks: autograd, the reference",
    )
