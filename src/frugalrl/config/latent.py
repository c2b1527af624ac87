"""The ``latent`` section: frame encoder, latent world model and the real/virtual curriculum."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from frugalrl.config._base import _Strict


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

    mode: Literal["stages", "adaptive"] = Field(
        "stages", description="stages: a fixed schedule by real steps; adaptive: the virtual share follows the return"
    )
    stages: list[StageConfig] = Field(
        default_factory=_seed_stages,
        min_length=1,
        description="stages mode: the schedule, in order; real_share sums to 1",
    )
    target_score: float | None = Field(None, description="adaptive mode: the return that counts as solved")
    adaptive_high: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description="adaptive mode: a return at or above this share of target_score switches to the second fraction",
    )
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

    hidden: list[int] = Field(
        default_factory=lambda: [256, 256], min_length=1, description="widths of the world model MLP's hidden layers"
    )
    learning_rate: float = Field(1e-3, gt=0, le=1.0, description="Adam's step size for the world model")
    epochs: int = Field(5, ge=1, description="epochs over the encoded dataset when fitted after the encoder")
    horizon: int = Field(16, ge=1, description="virtual episodes are cut (truncated) after this many steps")
    virtual_noise: float = Field(0.0, ge=0.0, description="std of Gaussian noise added to predicted latents")
    refresh_every_updates: int = Field(
        10, ge=0, description="real updates between Dyna-style refits of the world model on fresh real data; 0 = never"
    )
    refresh_steps: int = Field(50, ge=1, description="gradient steps of each world-model refit")
    rollout_steps: int = Field(
        1,
        ge=1,
        le=64,
        description="the refit's latent loss: 1 = one step (teacher-forced); k > 1 adds the open-loop error of "
        "k steps unrolled from the first latent with the recorded actions (model error compounds there)",
    )
    eval_horizon: int = Field(
        10, ge=1, description="steps ahead at which the world model's open-loop error is reported"
    )
    gate_min_auc: float = Field(
        0.8, ge=0.0, le=1.0, description="diagnostic gate: the reward head's AUC on the run's last real rollout"
    )
    gate_events_tolerance: float = Field(
        0.25, ge=0.0, description="diagnostic gate: imagined reward events within this share of the real number"
    )


class LatentConfig(_Strict):
    """Latent curriculum: a pretrained frame encoder, a latent world model and a real/virtual schedule
    (on with ``rollout.kind: latent``)."""

    latent_dim: int = Field(32, ge=2, le=1024, description="size of the latent vector the encoder maps frames to")
    objective: Literal["recon", "motion", "dynamics"] = Field(
        "dynamics", description="encoder loss: plain reconstruction, motion-weighted, or joint with the world model"
    )
    motion_weight: float = Field(20.0, ge=0.0, description="extra reconstruction weight on pixels that move")
    collect_steps: int = Field(20_000, ge=100, description="env steps of frames collected for pretraining")
    collect_envs: int = Field(8, ge=1, le=256, description="games played at once while collecting frames")
    behaviour: str = Field(
        "random", description="who plays while frames are collected: random, or a policy (path or models:/ URI)"
    )
    pretrain_updates: int = Field(3000, ge=1, description="gradient steps of the encoder's pretraining")
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
    batch_size: int = Field(64, ge=2, description="transitions per minibatch in the encoder's pretraining")
    learning_rate: float = Field(1e-3, gt=0, le=1.0, description="Adam's step size for the encoder's pretraining")
    holdout_fraction: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="the last share of each collected game, held out for the encoder's metrics (PSNR, probe)",
    )
    mixed_precision: Literal["off", "bf16", "auto"] = Field(
        "auto", description="bf16 autocast; auto = on CUDA only (bf16 is slower on most CPUs)"
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute the encoder's activations in the backward pass: less memory, more compute"
    )
    encoder_from: str | None = Field(
        None, description="a pretrained encoder (path or models:/name@alias); null = the run pretrains its own"
    )
    encoder_mode: Literal["frozen", "finetune"] = Field(
        "frozen", description="a pretrained encoder (encoder_from) as it is, or first trained further on this game"
    )
    encoder_adapter: Literal["none", "lora"] = Field(
        "none", description="lora: adapt the encoder with LoRA (peft) through the PPO loss in all-real stages"
    )
    lora_rank: int = Field(8, ge=1, le=256, description="encoder_adapter lora: the rank of its low-rank updates")
    lora_alpha: float = Field(
        16.0, gt=0, description="encoder_adapter lora: its scale (the update is scaled by alpha / rank)"
    )
    virtual_num_envs: int = Field(
        64, ge=1, le=65536, description="world-model envs stepped together in the virtual rollouts"
    )
    virtual_batch_size: int = Field(256, ge=1, description="PPO's minibatch size (samples) on virtual rollouts")
    real_batch_size: int = Field(64, ge=1, description="PPO's minibatch size (samples) on real rollouts")
    policy_input: Literal["raw", "standardised"] = Field(
        "raw",
        description="the policy's latent input as encoded, or standardised per dimension by the start latents' "
        "mean and spread (fixed for the run, saved with the policy)",
    )
    world_model: WorldModelConfig = Field(
        default_factory=WorldModelConfig,
        description="the latent world model: the virtual env the policy also trains in",
    )
    curriculum: CurriculumConfig = Field(
        default_factory=CurriculumConfig, description="how real and virtual rollouts are mixed over the run"
    )

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
