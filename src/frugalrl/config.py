"""Typed experiment configs: YAML in, validated pydantic models out, one-line errors.

A config file is the whole description of a run. ``load_config`` reads it, applies
``--set key.sub=value`` overrides, and validates it; anything wrong raises ``ConfigError``
with one line naming the file, the field path, the bad value and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from frugalrl.credentials import redact_data
from frugalrl.errors import ConfigError


def _is_number_field(annotation: Any) -> bool:
    """int or float (or an optional / union of them), not bool."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    options = options or (annotation,)
    return bool({int, float} & set(options)) and bool not in options


class _Strict(BaseModel):
    """Unknown keys refused; numbers finite (no inf or nan); a boolean is not a number (YAML's
    ``update_epochs: true`` would otherwise train with 1 epoch)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _is_number_field(field.annotation):
            raise ValueError("a boolean is not a number here; write the number")
        return value


class AtariConfig(_Strict):
    """Preprocessing of ALE games (done natively inside ale-py's vector env) and the scoring protocol.

    Evaluation plays full games (all lives), as published Atari scores do (Machado et al. 2018:
    sticky actions 0.25, a cap of 108,000 frames); training may cut the value target at a lost
    life (``life_loss``) while the game goes on.
    """

    frameskip: int = Field(4, ge=1, le=16)
    stack_num: int = Field(4, ge=1, le=16)
    img_size: int = Field(84, ge=36, le=210, description="the Nature CNN's three convolutions need 36+ pixels")
    grayscale: bool = True
    noop_max: int = Field(30, ge=0, le=1000)
    episodic_life: bool = Field(False, description="refused: it resets the whole game at a lost life; see life_loss")
    life_loss: bool = Field(True, description="training: a lost life ends the value target, the game goes on")
    fire_reset: bool = Field(False, description="press FIRE after each reset; off: the policy learns to serve")
    repeat_action_probability: float = Field(0.25, ge=0.0, le=1.0)
    max_episode_steps: int = Field(108_000, ge=1, description="frames before a game is cut (published: 108000)")

    @field_validator("episodic_life")
    @classmethod
    def _not_single_life(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "true makes every lost life reset the whole game, so scores are single-life scores; "
                "use env.atari.life_loss: true (the value target is cut at a lost life, the game goes on)"
            )
        return value

    def protocol_deviations(self) -> list[str]:
        """How this differs from the published full-game protocol (empty: comparable with published scores)."""
        out = []
        if self.repeat_action_probability != 0.25:
            out.append(f"sticky actions {self.repeat_action_probability:g} (published: 0.25)")
        if self.max_episode_steps != 108_000:
            out.append(f"games cut at {self.max_episode_steps} frames (published: 108000)")
        if self.fire_reset:
            out.append("FIRE pressed after each reset")
        if self.frameskip != 4:
            out.append(f"frameskip {self.frameskip} (published: 4)")
        return out


class DynamicsConfig(_Strict):
    """Changed physics for a MuJoCo task (the PEFT targets): scales on the compiled model."""

    mass_scale: float = Field(1.0, gt=0, description="every body's mass times this")
    friction_scale: float = Field(1.0, gt=0, description="every geom's sliding friction times this")
    gravity: tuple[float, float, float] | None = Field(None, description="replaces the model's gravity vector")

    @property
    def changed(self) -> bool:
        return self.mass_scale != 1.0 or self.friction_scale != 1.0 or self.gravity is not None


class EnvConfig(_Strict):
    """Which environment, how many copies, and which wrappers."""

    id: str = "CartPole-v1"
    num_envs: int = Field(8, ge=1, le=4096)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    normalize_obs: bool = False
    clip_obs: float = Field(10.0, gt=0)
    normalize_reward: bool = False
    clip_reward: float | None = Field(None, gt=0)
    frame_stack: int = Field(1, ge=1, le=16)
    atari: AtariConfig = Field(default_factory=AtariConfig)
    dynamics: DynamicsConfig = Field(default_factory=DynamicsConfig)
    batched: bool = Field(
        True,
        description="CartPole-v1: step all copies as arrays (bit-identical trajectories, faster); false = one by one",
    )

    @staticmethod
    def saved(spec: dict[str, Any]) -> dict[str, Any]:
        """A policy's saved env spec as it validates today: a policy trained with ale-py's
        ``episodic_life`` (single-life episodes, refused now) is evaluated on full games."""
        atari = spec.get("atari")
        if isinstance(atari, dict) and atari.get("episodic_life"):
            return {**spec, "atari": {**atari, "episodic_life": False}}
        return spec

    @field_validator("id")
    @classmethod
    def _known_env(cls, value: str) -> str:
        return _registered_env(value)


def _registered_env(value: str) -> str:
    from frugalrl.envs.registry import known_env_ids, validate_env_id

    if not validate_env_id(value):
        raise ValueError(f"not a registered environment; allowed: {known_env_ids()}")
    return value


class AdapterSpec(_Strict):
    """One parameter-efficient fine-tuning method with its options (``frugalrl.peft.METHODS``)."""

    method: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        from frugalrl.peft.methods import METHODS

        if value not in METHODS:
            raise ValueError(f"unknown PEFT method {value!r}; allowed: {sorted(METHODS)}")
        return value


class PolicyConfig(_Strict):
    """Network shape. ``kind: auto`` picks Nature-CNN for images, MLP otherwise."""

    kind: Literal["auto", "mlp", "cnn"] = "auto"
    hidden: list[int] = Field(default_factory=lambda: [64, 64], min_length=1)
    activation: Literal["tanh", "relu"] = "tanh"
    log_std_init: float = 0.0
    ortho_init: bool = Field(True, description="orthogonal init (PPO); false = PyTorch default (SB3 DQN/SAC)")
    block: Literal["plain", "fractal"] = Field(
        "plain", description="fractal: the RMT seed's x + x1 + x2 residual blocks (MLP: after the first layer)"
    )
    adapter: AdapterSpec | None = Field(None, description="a PEFT adapter on the network (set by `peft apply`)")

    @model_validator(mode="after")
    def _fractal_widths(self) -> PolicyConfig:
        if self.block == "fractal" and len(set(self.hidden)) > 1:
            raise ValueError(f"policy.block fractal keeps one width; hidden {self.hidden} must repeat one size")
        return self

    @field_validator("hidden")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(h < 1 for h in value):
            raise ValueError("every hidden size must be >= 1")
        return value


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
    compile: Literal["auto", "fused", "inductor", "off"] = Field(
        "auto",
        description="the minibatch step: fused (hand-written MLP forward/backward), inductor (torch.compile), "
        "off (eager autograd); auto = on the CPU fused where the policy allows, else off",
    )

    @field_validator("compile", mode="before")
    @classmethod
    def _yaml_switch(cls, value: Any) -> Any:
        # YAML reads a bare `off` / `on` as a boolean: off is eager, on the fused step.
        if isinstance(value, bool):
            return "fused" if value else "off"
        return {"on": "fused"}.get(value, value) if isinstance(value, str) else value


class _RegisteredKind(_Strict):
    """A section whose ``kind`` names a registered technique and whose ``settings`` that technique validates."""

    @classmethod
    def _registry(cls) -> Any:
        """The ``plugins.Registry`` of this section's kinds: each subclass names its own."""
        raise TypeError(f"{cls.__name__} must name its registry (override _registry)")

    @field_validator("kind", check_fields=False)
    @classmethod
    def _registered(cls, kind: str) -> str:
        cls._registry().entry(kind)  # the registry imports its package's modules on first use
        return kind

    @field_validator("settings", check_fields=False)
    @classmethod
    def _settings(cls, settings: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "kind" in info.data:  # an unknown kind has its own error already
            cls._registry().settings_for(info.data["kind"], settings)
        return settings


class ReplayConfig(_RegisteredKind):
    """The off-policy replay store: uniform, proportional prioritized, or hot/warm/cold tiers."""

    kind: str = Field("uniform", description="a registered store (frugalrl.replay): uniform, prioritized, tiered")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the store's own settings, validated by the model it registers"
    )
    capacity: int = Field(100_000, ge=2, description="transitions")
    max_bytes: int | None = Field(None, ge=1, description="memory budget of the store; the smaller limit wins")
    alpha: float = Field(0.6, ge=0.0, le=1.0, description="prioritized: P(i) ~ priority^alpha")
    beta: float = Field(0.4, ge=0.0, le=1.0, description="importance-weight exponent at the start (anneals to 1)")
    beta_steps: int = Field(100_000, ge=1, description="sample calls over which beta anneals to 1")
    tier_weights: tuple[float, float, float] = Field((0.5, 0.3, 0.2), description="tiered: hot, warm, cold")
    hot_quantile: float = Field(0.9, gt=0.0, lt=1.0)
    warm_quantile: float = Field(0.5, gt=0.0, lt=1.0)

    @classmethod
    def _registry(cls) -> Any:
        from frugalrl.replay.registry import REPLAY_STORES

        return REPLAY_STORES

    @model_validator(mode="after")
    def _tiers(self) -> ReplayConfig:
        if self.warm_quantile >= self.hot_quantile:
            raise ValueError(
                f"replay.warm_quantile {self.warm_quantile} must be below hot_quantile {self.hot_quantile}"
            )
        if min(self.tier_weights) < 0 or sum(self.tier_weights) <= 0:
            raise ValueError("replay.tier_weights must be non-negative with a positive sum")
        return self


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


class MetaConfig(_Strict):
    """The RMT meta-controller: nudges lr, gamma and exploration from training signals, within bounds."""

    enabled: bool = False
    interval: int = Field(10, ge=1, description="updates between decisions")
    lr_bounds: tuple[float, float] = (1e-5, 1e-3)
    gamma_bounds: tuple[float, float] = (0.9, 0.99)
    exploration_bounds: tuple[float, float] = Field((0.01, 0.3), description="DQN epsilon after its decay phase")
    lr_down: float = Field(0.7, gt=0.0, lt=1.0, description="lr factor when the value loss rises")
    lr_up: float = Field(1.1, gt=1.0, le=2.0, description="lr factor when the value loss has settled")
    gamma_step: float = Field(0.005, gt=0.0, le=0.1)
    exploration_factor: float = Field(1.25, gt=1.0, le=4.0)
    rise_tolerance: float = Field(0.2, gt=0.0, description="fast value-loss EMA above slow by this share: rising")
    settle_tolerance: float = Field(0.05, gt=0.0, description="fast and slow value-loss EMAs this close: settled")
    collapse_rate: float = Field(0.02, gt=0.0, description="entropy falling faster than this per update: collapsing")

    @model_validator(mode="after")
    def _ordered(self) -> MetaConfig:
        for name in ("lr_bounds", "gamma_bounds", "exploration_bounds"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"meta.{name} {low, high}: allowed 0 <= low <= high")
        return self


class ScoreStage(_Strict):
    """Once the mean episode return reaches ``threshold``, switch to these values."""

    threshold: float
    learning_rate: float | None = Field(None, gt=0, le=1.0)
    gamma: float | None = Field(None, ge=0.0, le=1.0)


class ScoreStagesConfig(_Strict):
    """The RMT seed's curriculum by score (``difficulty_metric: episode_return``)."""

    stages: list[ScoreStage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _increasing(self) -> ScoreStagesConfig:
        thresholds = [stage.threshold for stage in self.stages]
        if thresholds != sorted(thresholds):
            raise ValueError(f"score_stages thresholds {thresholds} must increase")
        return self


class EvaluatorConfig(_Strict):
    """The importance evaluator's network and training."""

    hidden: list[int] = Field(default_factory=lambda: [16, 16], min_length=1)
    learning_rate: float = Field(1e-3, gt=0, le=1.0)
    batch_size: int = Field(256, ge=1)
    pretrain_steps: int = Field(10_000, ge=1, description="env steps of baseline PPO collected for pretraining")
    pretrain_epochs: int = Field(10, ge=1)
    holdout_fraction: float = Field(0.2, gt=0, lt=1)
    champion_min_spearman: float = Field(
        0.1, ge=-1, le=1, description="registry gate: held-out rank correlation a version needs to become champion"
    )


class PivotConfig(_Strict):
    """Key-state compute skipping (PivotRL): thresholds on the evaluator's score in [0, 1].

    score >= high: full compute; low <= score < high: kept with probability keep_prob and
    weighted 1 / keep_prob; score < low: skipped. During the first threshold_decay_steps env
    steps, low is raised by threshold_boost * (1 - step / threshold_decay_steps) (the seed's
    ``dynamic_threshold``), capped at high.
    """

    label: Literal["policy_gradient", "advantage", "grad_norm"] = "policy_gradient"
    high: float = Field(0.8, ge=0.0, le=1.0)
    low: float = Field(0.5, ge=0.0, le=1.0)
    keep_prob: float = Field(0.5, gt=0.0, le=1.0)
    warmup_steps: int = Field(1000, ge=0, description="env steps of uniform (full) compute first")
    min_full_fraction: float = Field(0.2, ge=0.0, le=1.0, description="safety margin: share always fully computed")
    score: Literal["rank", "raw"] = Field(
        "rank",
        description="thresholds apply to the rollout's score quantiles (rank) or to the evaluator's raw output",
    )
    p_min: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="score < low: kept with this probability, weight 1 / p_min (unbiased); 0 = skipped (biased)",
    )
    threshold_boost: float = Field(0.2, ge=0.0, le=1.0)
    threshold_decay_steps: int = Field(10_000, ge=1)
    refresh_every_updates: int = Field(10, ge=0, description="evaluator fine-tuning on fresh data; 0 = never")
    refresh_epochs: int = Field(2, ge=1)
    evaluator_from: str | None = Field(None, description="pretrained evaluator: path or models:/name@alias")
    evaluator: EvaluatorConfig = Field(default_factory=EvaluatorConfig)

    @model_validator(mode="after")
    def _ordered(self) -> PivotConfig:
        if self.low > self.high:
            raise ValueError(f"pivot.low {self.low} is above pivot.high {self.high}; allowed: low <= high")
        return self


class StageConfig(_Strict):
    """One curriculum stage: its share of the real-step budget and the virtual share of its steps."""

    virtual_fraction: float = Field(ge=0.0, lt=1.0, description="virtual steps / all steps in this stage")
    real_share: float = Field(gt=0.0, le=1.0, description="share of total real env steps spent in this stage")


def _seed_stages() -> list[StageConfig]:
    # The seed's 70/30 -> 30/70 -> 100% real schedule.
    return [
        StageConfig(virtual_fraction=0.7, real_share=0.2),
        StageConfig(virtual_fraction=0.3, real_share=0.3),
        StageConfig(virtual_fraction=0.0, real_share=0.5),
    ]


class CurriculumConfig(_Strict):
    """How real and virtual rollouts are mixed during latent training."""

    mode: Literal["stages", "adaptive"] = "stages"
    stages: list[StageConfig] = Field(default_factory=_seed_stages, min_length=1)
    target_score: float | None = Field(None, description="adaptive mode: the return that counts as solved")
    adaptive_high: float = Field(0.8, gt=0.0, le=1.0, description="score >= high * target: mostly real data")
    adaptive_virtual_fractions: tuple[float, float] = Field(
        (0.5, 0.1), description="adaptive mode: virtual fraction below / above the score threshold"
    )

    @model_validator(mode="after")
    def _check(self) -> CurriculumConfig:
        total = sum(stage.real_share for stage in self.stages)
        if self.mode == "stages" and abs(total - 1.0) > 1e-6:
            raise ValueError(f"curriculum stages' real_share sum to {total:g}; allowed: they sum to 1")
        if self.mode == "adaptive" and self.target_score is None:
            raise ValueError("curriculum.mode adaptive needs curriculum.target_score")
        if not all(0.0 <= f < 1.0 for f in self.adaptive_virtual_fractions):
            raise ValueError("curriculum.adaptive_virtual_fractions must lie in [0, 1)")
        return self


class WorldModelConfig(_Strict):
    """The latent world model (z, a) -> (z', reward, termination): the virtual environment."""

    hidden: list[int] = Field(default_factory=lambda: [256, 256], min_length=1)
    learning_rate: float = Field(1e-3, gt=0, le=1.0)
    epochs: int = Field(5, ge=1, description="epochs over the encoded dataset when fitted after the encoder")
    horizon: int = Field(16, ge=1, description="virtual episodes are cut (truncated) after this many steps")
    virtual_noise: float = Field(0.0, ge=0.0, description="std of Gaussian noise added to predicted latents")
    refresh_every_updates: int = Field(10, ge=0, description="Dyna-style refit on fresh real data; 0 = never")
    refresh_steps: int = Field(50, ge=1, description="gradient steps per refresh")
    rollout_steps: int = Field(
        1,
        ge=1,
        le=64,
        description="the refit's latent loss: 1 = one step (teacher-forced); k > 1 adds the open-loop error of "
        "k steps unrolled from the first latent with the recorded actions (model error compounds there)",
    )
    eval_horizon: int = Field(10, ge=1, description="multi-step error reported at this many steps")
    gate_min_auc: float = Field(
        0.8, ge=0.0, le=1.0, description="diagnostic gate: the reward head's AUC on the run's last real rollout"
    )
    gate_events_tolerance: float = Field(
        0.25, ge=0.0, description="diagnostic gate: imagined reward events within this share of the real number"
    )


class LatentConfig(_Strict):
    """Latent curriculum: a pretrained frame encoder, a latent world model and a real/virtual schedule."""

    enabled: bool = False
    latent_dim: int = Field(32, ge=2, le=1024)
    objective: Literal["recon", "motion", "dynamics"] = Field(
        "dynamics", description="encoder loss: plain reconstruction, motion-weighted, or joint with the world model"
    )
    motion_weight: float = Field(20.0, ge=0.0, description="extra reconstruction weight on pixels that move")
    collect_steps: int = Field(20_000, ge=100, description="env steps of frames collected for pretraining")
    collect_envs: int = Field(8, ge=1, le=256)
    behaviour: str = Field("random", description="'random' or a policy path / models:/ URI that plays the game")
    pretrain_updates: int = Field(3000, ge=1, description="encoder gradient steps")
    pretrain_games: list[str] = Field(
        default_factory=list,
        description="games whose frames train one shared encoder (a world-model head each); empty = env.id",
    )
    probe: bool = Field(True, description="RAM probe of the pretrained latent (~1 min on CPU); off: PSNR is its score")
    champion_min_psnr_db: float = Field(
        15.0, ge=0, description="registry gate: reconstruction PSNR an encoder needs to become champion"
    )
    champion_min_ball_r2: float = Field(
        0.0, le=1, description="registry gate: ball probe R^2 (MLP) an encoder needs to become champion, when probed"
    )
    batch_size: int = Field(64, ge=2)
    learning_rate: float = Field(1e-3, gt=0, le=1.0)
    holdout_fraction: float = Field(0.1, gt=0, lt=1)
    mixed_precision: Literal["off", "bf16", "auto"] = Field(
        "auto", description="bf16 autocast; auto = on CUDA only (bf16 is slower on most CPUs)"
    )
    gradient_checkpointing: bool = False
    encoder_from: str | None = Field(None, description="pretrained encoder: path or models:/name@alias")
    encoder_mode: Literal["frozen", "finetune"] = "frozen"
    encoder_adapter: Literal["none", "lora"] = Field(
        "none", description="lora: adapt the encoder with LoRA (peft) through the PPO loss in all-real stages"
    )
    lora_rank: int = Field(8, ge=1, le=256)
    lora_alpha: float = Field(16.0, gt=0)
    virtual_num_envs: int = Field(64, ge=1, le=65536)
    virtual_batch_size: int = Field(256, ge=1, description="PPO minibatch on virtual rollouts")
    real_batch_size: int = Field(64, ge=1, description="PPO minibatch on real rollouts")
    world_model: WorldModelConfig = Field(default_factory=WorldModelConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)

    @model_validator(mode="after")
    def _lora_needs_a_real_stage(self) -> LatentConfig:
        if self.encoder_adapter == "lora":
            curriculum = self.curriculum
            if curriculum.mode != "stages" or curriculum.stages[-1].virtual_fraction > 0:
                raise ValueError(
                    "latent.encoder_adapter lora adapts the encoder in the final all-real stage; "
                    "use curriculum.mode stages with a last stage of virtual_fraction 0"
                )
        return self


class SelectionConfig(_RegisteredKind):
    """Which samples get compute: all (plain), pivot (importance), random or epochs (the two controls)."""

    kind: str = Field("all", description="a registered selector (frugalrl.selectors): all, pivot, random, epochs")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the selector's own settings, validated by the model it registers"
    )
    keep_fraction: float = Field(
        0.35, gt=0.0, le=1.0, description="random: share of samples kept; epochs: share of the epochs' samples"
    )
    packing: Literal["rollout", "epoch", "minibatch"] = Field(
        "rollout",
        description="rollout / epoch: choose over the rollout each epoch, pack all epochs' (or each epoch's) "
        "kept samples into full minibatches (fewer optimizer steps); minibatch: thin each minibatch",
    )

    @classmethod
    def _registry(cls) -> Any:
        from frugalrl.selectors import SELECTORS

        return SELECTORS


MAX_EVAL_EPISODES = 10_000  # 30 are the field's Atari protocol; far more is a typo, not a plan (hours of play)


class EvalConfig(_Strict):
    episodes: int = Field(20, ge=1, le=MAX_EVAL_EPISODES)
    deterministic: bool = True
    seed: int = Field(10_000, ge=0, description="episode i uses seed + i")


class DistributedConfig(_Strict):
    """Multi-worker training (``frugalrl.fusion``): workers > 1 runs under torchrun, gradients fused."""

    workers: int = Field(1, ge=1, le=64)
    mode: Literal["topk", "dense"] = Field("topk", description="top-k fusion, or a dense all-reduce (baseline)")
    topk: float = Field(0.2, gt=0.0, le=1.0, description="share of each gradient tensor sent per step")
    beta: float = Field(0.0, ge=0.0, lt=1.0, description="fusion momentum: g = beta g + (1 - beta) mean")
    clip: float = Field(0.0, ge=0.0, description="norm clip of the fused gradient at step 0 (0 = none)")
    clip_decay: float = Field(0.999, gt=0.0, le=1.0, description="the clip threshold's factor per step")
    value_dtype: Literal["float32", "float16"] = Field("float16", description="values sent (indices: int16/int32)")
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    timeout_s: int = Field(120, ge=5, description="a collective waiting longer fails the job (a dead worker)")


class CheckpointConfig(_Strict):
    every_updates: int = Field(50, ge=1)


class TrackingConfig(_Strict):
    enabled: bool = True
    experiment: str = "frugalrl"
    log_model: bool = True
    timeout_s: float = Field(10.0, gt=0, le=600, description="one request to an MLflow server, at most")
    retries: int = Field(2, ge=0, le=10, description="retries of a failed request (1 s, 2 s, ... apart)")
    reconnect_s: float = Field(
        30.0, gt=0, le=3600, description="while the server is away, how often a run asks whether it is back"
    )


class SearchDimension(_Strict):
    """One tuned value: a float or int range (``log`` for learning rates), or a list of choices."""

    type: Literal["float", "int", "categorical"] = "float"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: list[Any] | None = None

    @model_validator(mode="after")
    def _complete(self) -> SearchDimension:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical dimension needs choices: [...]")
        elif self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"a {self.type} dimension needs low < high (got {self.low}, {self.high})")
        elif self.log and self.low <= 0:
            raise ValueError("a log-scale dimension needs low > 0")
        return self


class TuningConfig(_Strict):
    """Optuna tuning (``frugalrl tune``): the search space is a map of config keys to dimensions."""

    trials: int = Field(8, ge=1, description="trials per study (all workers together)")
    space: dict[str, SearchDimension] = Field(default_factory=dict, description="dotted config key -> dimension")
    metric: Literal["eval_mean", "eval_iqm"] = "eval_mean"
    pruner: Literal["median", "none"] = "median"
    report_every_updates: int = Field(5, ge=1, description="intermediate value (running episode return) period")
    startup_trials: int = Field(2, ge=0, description="trials before pruning starts (median pruner)")
    round_size: int = Field(
        4,
        ge=1,
        description="trials proposed from the same finished history (frugalrl.tuning_rounds): up to this many "
        "workers run at once, and results do not depend on how many do",
    )
    storage: str | None = Field(
        None, description="Optuna storage URL or journal file; OPTUNA_STORAGE wins; default: DIR/optuna.db (sqlite)"
    )
    study_name: str | None = Field(None, description="default: the config's name")
    max_retry: int = Field(2, ge=0, description="a crashed worker's trial is re-queued up to this many times")
    heartbeat_s: int = Field(10, ge=1, description="a trial without heartbeat this long (x3 grace) is failed")

    @field_validator("pruner", mode="before")
    @classmethod
    def _reproducible_pruner(cls, value: Any) -> Any:
        if value == "hyperband":
            raise ValueError(
                "Hyperband prunes against whatever other workers have reported so far, so a study would not "
                "be reproducible; use median (compared with earlier rounds only) or none"
            )
        return value

    @field_validator("space")
    @classmethod
    def _keys_exist(cls, value: dict[str, SearchDimension]) -> dict[str, SearchDimension]:
        for key in value:
            if not key.replace("_", "").replace(".", "").isalnum():
                raise ValueError(f"search key {key!r} is not a dotted config key (e.g. ppo.learning_rate)")
        return value


class PromotionConfig(_Strict):
    """The registry's promotion gate (``frugalrl.promotion``): statistical support or no promotion."""

    test: Literal["welch", "bootstrap"] = "welch"
    alpha: float = Field(0.05, gt=0.0, lt=0.5, description="significance level (welch) / interval tail (bootstrap)")
    min_improvement: float = Field(0.0, ge=0.0, description="the return margin the challenger must beat")
    min_episodes: int = Field(5, ge=2, description="fewer evaluation episodes than this never promote")
    pair_seeds: bool = Field(
        True, description="welch: when both evaluations ran on the same seeds, a paired t-test on per-seed differences"
    )


class PeftTarget(_Strict):
    """A changed task to transfer the source policy to: new physics, or a sibling env id."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    env_id: str | None = Field(None, description="a sibling task; default: the source's env")
    dynamics: DynamicsConfig = Field(default_factory=DynamicsConfig)

    @field_validator("env_id")
    @classmethod
    def _known_env(cls, value: str | None) -> str | None:
        return None if value is None else _registered_env(value)


class PeftConfig(_Strict):
    """``frugalrl peft compare``: fine-tune a source policy on each target with each method."""

    source: str | None = Field(
        None, description="a run directory or models:/NAME@ALIAS of a SAC run; none: train one with this config"
    )
    min_source_return: float | None = Field(
        None,
        description="refuse a source policy whose evaluation is below this (fine-tuning a weak one compares nothing)",
    )
    targets: list[PeftTarget] = Field(default_factory=list, min_length=1)
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"full": {}, "lora": {}, "bitfit": {}},
        description="method name -> options overriding the registry's defaults",
    )
    seeds: int = Field(3, ge=1)
    steps: int = Field(20_000, ge=1, description="env steps of fine-tuning per method, target and seed")
    warmup_steps: int = Field(1_000, ge=0, description="steps collected by the source policy before updates")
    learning_rate: float = Field(3e-4, gt=0)
    adapt_critic: bool = Field(True, description="the method adapts the critics too (else they train fully)")
    eval_episodes: int = Field(5, ge=1)

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from frugalrl.peft.methods import METHODS

        unknown = sorted(set(value) - set(METHODS))
        if unknown:
            raise ValueError(f"unknown PEFT method(s) {unknown}; allowed: {sorted(METHODS)}")
        if not value:
            raise ValueError(f"name at least one method; allowed: {sorted(METHODS)}")
        for name, options in value.items():  # typed here, not after the source policy has trained
            defaults = METHODS[name].defaults
            for key, option in (options or {}).items():
                if key not in defaults:
                    allowed = sorted(defaults) or "none"
                    raise ValueError(f"PEFT method {name}: unknown option {key!r}; allowed: {allowed}")
                if isinstance(option, bool) or not isinstance(option, int) or option < 1:
                    raise ValueError(f"PEFT method {name}: {key} = {option!r} must be a positive whole number")
        return value


_ALGO_SECTIONS: dict[str, type[BaseModel]] = {"ppo": PPOConfig, "dqn": DQNConfig, "sac": SACConfig}


class ExperimentConfig(_Strict):
    """The root of every experiment file."""

    name: str = "experiment"
    seed: int = Field(1, ge=0)
    device: Literal["auto", "cpu", "cuda"] = "cpu"
    threads: int = Field(1, ge=0, description="torch CPU threads; 0 keeps torch's default")
    algo: Literal["ppo", "dqn", "sac"] = "ppo"
    env: EnvConfig = Field(default_factory=EnvConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    dqn: DQNConfig = Field(default_factory=DQNConfig)
    sac: SACConfig = Field(default_factory=SACConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    meta: MetaConfig = Field(default_factory=MetaConfig)
    score_stages: ScoreStagesConfig = Field(default_factory=ScoreStagesConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    pivot: PivotConfig = Field(default_factory=PivotConfig)
    latent: LatentConfig = Field(default_factory=LatentConfig)
    peft: PeftConfig | None = Field(None, description="the PEFT comparison (`frugalrl peft compare`)")
    total_real_steps: int | None = Field(
        None, ge=1, description="real env-step budget; when set it is the value of ppo.total_timesteps"
    )
    cpu_budget_s: float | None = Field(
        None,
        gt=0,
        description="stop training once the run's process has used this many CPU-seconds (every thread, set-up "
        "included; evaluation is not): comparisons at equal compute. The step budget still applies",
    )
    eval: EvalConfig = Field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    promotion: PromotionConfig = Field(default_factory=PromotionConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    tuning: TuningConfig | None = Field(None, description="Optuna search (`frugalrl tune`)")
    log_every_updates: int = Field(10, ge=1)

    @property
    def algo_config(self) -> PPOConfig | DQNConfig | SACConfig:
        """The hyperparameter section of the chosen algorithm."""
        return {"dqn": self.dqn, "sac": self.sac}.get(self.algo, self.ppo)

    @model_validator(mode="after")
    def _real_step_budget(self) -> ExperimentConfig:
        budget, section = self.total_real_steps, self.algo_config
        if budget is not None and budget != section.total_timesteps:
            if "total_timesteps" in section.model_fields_set:
                raise ValueError(
                    f"total_real_steps {budget} and {self.algo}.total_timesteps {section.total_timesteps} "
                    "disagree; set only one of them"
                )
            section.total_timesteps = budget
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_ignored_algo_section(cls, data: Any) -> Any:
        """A section of an algorithm the run does not use, with settings in it, would be ignored silently."""
        if not isinstance(data, dict):
            return data
        algo = data.get("algo", "ppo")
        # A whole config written back (a run's config.yaml) holds every algorithm's section at its
        # defaults, so there only a changed value counts; in a file a person wrote, any key does.
        dumped = all(isinstance(data.get(name), dict) for name in _ALGO_SECTIONS)
        for other, model in _ALGO_SECTIONS.items():
            section = data.get(other)
            if other == algo or not isinstance(section, dict) or not section:
                continue
            ignored = sorted(section)
            if dumped:
                try:  # compared as validated values ("1e-05" from a JSON dump is YAML text for 1e-5)
                    given = model.model_validate(section).model_dump()
                except ValidationError:
                    continue  # the section's own validation names the problem
                defaults = model().model_dump()
                ignored = [k for k in ignored if given[k] != defaults[k]]
            if ignored:
                raise ValueError(
                    f"{other}: settings {ignored} are ignored by algo {algo!r}; remove the {other} "
                    f"section or set algo: {other}"
                )
        return data

    @model_validator(mode="after")
    def _peft_widths_fit_the_network(self) -> ExperimentConfig:
        """A rank or bottleneck wider than the narrowest hidden layer fits no layer that has it as its output;
        refused here, not after the source policy has trained (the input layer's width is checked when a
        method is applied, once the env is made)."""
        if self.peft is None:
            return self
        from frugalrl.peft.methods import METHODS

        narrowest = min(self.policy.hidden)
        for name, options in self.peft.methods.items():
            resolved = {**METHODS[name].defaults, **(options or {})}
            # VeRA's shared random pair may be wider than a layer (frugalrl.peft.methods._fits)
            for key in ("bottleneck",) if name == "vera" else ("rank", "bottleneck"):
                if resolved.get(key, 0) > narrowest:
                    raise ValueError(
                        f"peft.methods.{name}.{key} {resolved[key]} is wider than the network's narrowest layer "
                        f"(policy.hidden {self.policy.hidden}); use at most {narrowest}"
                    )
        return self

    @model_validator(mode="after")
    def _cpu_budget_on_one_worker(self) -> ExperimentConfig:
        if self.cpu_budget_s is not None and self.distributed.workers > 1:
            # each worker would stop at its own update while the others wait for its gradients
            raise ValueError(
                "cpu_budget_s ends one process's training; with distributed.workers > 1 the workers would stop "
                "apart: drop cpu_budget_s or train on one worker"
            )
        return self

    @model_validator(mode="after")
    def _latent_runs_alone(self) -> ExperimentConfig:
        if self.algo != "ppo" and (self.latent.enabled or self.selection.kind != "all"):
            raise ValueError(
                f"algo {self.algo}: the latent curriculum and sample selection work with PPO only; "
                "set algo: ppo or turn them off"
            )
        if self.latent.enabled and self.selection.kind != "all":
            raise ValueError(
                f"latent.enabled with selection.kind {self.selection.kind}: the latent curriculum does not "
                "combine with sample selection yet; set selection.kind: all"
            )
        return self

    @model_validator(mode="after")
    def _distributed_supported(self) -> ExperimentConfig:
        if self.distributed.workers > 1:
            if self.latent.enabled or self.selection.kind != "all":
                raise ValueError(
                    "distributed.workers > 1: the latent curriculum and sample selection do not run on several "
                    "workers yet; set distributed.workers: 1 or turn them off"
                )
            if self.algo == "ppo" and self.ppo.target_kl is not None:
                raise ValueError(
                    "distributed.workers > 1 with ppo.target_kl: workers would stop their epochs at different "
                    "minibatches and wait for each other forever; set ppo.target_kl: null"
                )
        return self

    @model_validator(mode="after")
    def _batch_fits_rollout(self) -> ExperimentConfig:
        rollout = self.env.num_envs * self.ppo.num_steps
        if self.algo == "ppo" and self.ppo.batch_size > rollout:
            raise ValueError(
                f"ppo.batch_size {self.ppo.batch_size} exceeds the rollout size "
                f"env.num_envs * ppo.num_steps = {rollout}; allowed: <= {rollout}"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def hash(self) -> str:
        """Content hash of the resolved config (stable across key order).

        Fields added after many checkpoints were written (``_ADDED_LATER``) are left out while at
        their default, so configs that do not use them keep their hash and their checkpoints.
        """
        data = self.to_dict()
        for path, default in _ADDED_LATER.items():
            *parents, key = path
            node = data
            for part in parents:
                node = node[part] if isinstance(node, dict) else None
            if isinstance(node, dict) and node.get(key) == default:  # an optional section may be absent
                del node[key]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# Added after checkpoints existed; left out of ``hash()`` at these defaults (add new fields here).
_ADDED_LATER: dict[tuple[str, ...], Any] = {
    ("selection", "settings"): {},
    ("replay", "settings"): {},
    ("pivot", "evaluator", "champion_min_spearman"): 0.1,
    ("latent", "champion_min_psnr_db"): 15.0,
    ("latent", "champion_min_ball_r2"): 0.0,
    ("tracking", "timeout_s"): 10.0,
    ("tracking", "retries"): 2,
    ("promotion", "pair_seeds"): True,
    ("latent", "pretrain_games"): [],
    ("env", "atari", "life_loss"): True,
    ("env", "atari", "fire_reset"): False,
    ("cpu_budget_s",): None,
    ("latent", "world_model", "rollout_steps"): 1,
    ("latent", "world_model", "gate_min_auc"): 0.8,
    ("latent", "world_model", "gate_events_tolerance"): 0.25,
    ("tuning", "round_size"): 4,
    ("tracking", "reconnect_s"): 30.0,
}


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists are kept as values)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{source}: override {item!r} has no '='; allowed form: --set key.sub=value")
        path, raw = item.split("=", 1)
        keys = [k for k in path.strip().split(".") if k]
        if not keys:
            raise ConfigError(f"{source}: override {item!r} has an empty key")
        node = data
        for key in keys[:-1]:
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"{source}: override {item!r}: {key} is not a section")
            node = child
        try:
            node[keys[-1]] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or "not valid YAML"
            raise ConfigError(
                f"{source}: --set {item!r}: the value does not parse ({problem}); quote it or complete it"
            ) from None
    return data


def _model_at(path: tuple[Any, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The pydantic model that owns the field at ``path`` (for listing allowed keys)."""
    model: type[BaseModel] | None = root
    for key in path[:-1]:
        if model is None or key not in model.model_fields:
            return None
        annotation = model.model_fields[key].annotation
        # ``Stage | None``: the model inside the optional (profile stages are optional sections)
        options = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
        annotation = options[0] if len(options) == 1 else annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return model


def _describe(error: dict[str, Any], source: str, extra: int, root: type[BaseModel] | None = None) -> str:
    """One line for one pydantic error; ``root`` is the validated model (default ``ExperimentConfig``)."""
    loc = tuple(error.get("loc", ()))
    field = ".".join(str(part) for part in loc) or "<root>"
    value = error.get("input")
    more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
    if error["type"] == "extra_forbidden":
        owner = _model_at(loc, root or ExperimentConfig)
        allowed = ", ".join(owner.model_fields) if owner else "see the docs"
        return f"{source}: {field}: unknown key; allowed keys here: {allowed}{more}"
    if error["type"] == "missing":
        return f"{source}: {field}: required key missing; add it{more}"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if loc:
        return f"{source}: {field} = {value!r}: {message}{more}"
    return f"{source}: {message}{more}"


def validate_config(data: Any, source: str = "<config>") -> ExperimentConfig:
    """Validate a parsed mapping into an ``ExperimentConfig`` or raise a one-line ``ConfigError``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    # A credential never enters the config, so nothing recorded from it (params, config.yaml,
    # checkpoints, the hash) holds one; its real value goes by environment (frugalrl.credentials).
    data = redact_data(data)
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        raise ConfigError(_describe(errors[0], source, len(errors) - 1)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error, not "the last wins"."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                lines = f"lines {seen[key] + 1} and {key_node.start_mark.line + 1}"
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice ({lines})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def yaml_mapping(text: str, source: str, what: str = "config") -> dict[str, Any]:
    """Parse YAML ``text`` that must be a non-empty mapping (duplicate keys refused); one-line ``ConfigError``."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or ""
        detail = f" ({problem})" if "given twice" in problem else ""
        raise ConfigError(f"{source}: not valid YAML{where}{detail}; fix the syntax") from None
    if data is None:
        raise ConfigError(f"{source}: the {what} is empty; write its keys (see configs/ for examples)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    return data


def read_text_file(path: str | Path, what: str, example: str) -> str:
    """A UTF-8 text file's contents, or a one-line ``ConfigError`` saying what is wrong with the path."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: {what} not found; pass an existing file such as {example}")
    if not path.is_file():
        raise ConfigError(f"{path}: is a directory, not a {what}; pass a file such as {example}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file (binary?); pass a YAML {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML experiment file, apply overrides, validate."""
    source = str(path)
    data = yaml_mapping(read_text_file(path, "config file", "configs/cartpole-ppo.yaml"), source)
    data = apply_overrides(data, overrides or [], source)
    return validate_config(data, source)


def config_from_yaml_text(text: str, overrides: list[str] | None = None, source: str = "<config>") -> ExperimentConfig:
    """Like ``load_config`` for YAML text (used by pipeline components)."""
    return validate_config(apply_overrides(yaml_mapping(text, source), overrides or [], source), source)
