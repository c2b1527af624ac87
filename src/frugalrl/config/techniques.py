"""The techniques plugged into a learner: its rollout source, replay, the meta-controller, score stages, PivotRL and
sample selection."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from frugalrl.config._base import _RegisteredKind, _Strict


class RolloutConfig(_RegisteredKind):
    """Where the learner's experience comes from: the real vector env (``real``), or the latent curriculum's mix
    of real and world-model rollouts (``latent``, configured by the ``latent`` section, which the encoder's
    pretraining reads too)."""

    _section: ClassVar[str] = "rollout"
    kind: str = Field("real", description="a registered rollout source (frugalrl.rollouts): real, latent")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the source's own settings, validated by the model it registers"
    )


class ReplayConfig(_RegisteredKind):
    """The off-policy replay store: uniform, proportional prioritized, or hot/warm/cold tiers."""

    _section: ClassVar[str] = "replay"
    kind: str = Field("uniform", description="a registered store (frugalrl.replay): uniform, prioritized, tiered")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the store's own settings, validated by the model it registers"
    )
    capacity: int = Field(100_000, ge=2, description="transitions the store holds; the oldest go first once full")
    max_bytes: int | None = Field(
        None, ge=1, description="memory budget of the store in bytes; the smaller of it and capacity wins; null = none"
    )


class MetaConfig(_RegisteredKind):
    """The hyper controller of DQN and SAC: fixed hyperparameters, or the RMT meta-controller (``rmt``)."""

    _section: ClassVar[str] = "meta"
    kind: str = Field("fixed", description="a registered hyper controller (frugalrl.meta): fixed, rmt")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the controller's own settings, validated by the model it registers"
    )


class ScoreStage(_Strict):
    """Once the mean episode return reaches ``threshold``, switch to these values."""

    threshold: float = Field(description="mean recent episode return at which this stage begins")
    learning_rate: float | None = Field(
        None, gt=0, le=1.0, description="the learning rate from this stage on; null = unchanged"
    )
    gamma: float | None = Field(None, ge=0.0, le=1.0, description="the discount from this stage on; null = unchanged")


class ScoreStagesConfig(_Strict):
    """The RMT seed's curriculum by score (``difficulty_metric: episode_return``)."""

    stages: list[ScoreStage] = Field(
        default_factory=list, description="stages by increasing threshold, each passed once; empty = none"
    )

    @model_validator(mode="after")
    def _increasing(self) -> ScoreStagesConfig:
        thresholds = [stage.threshold for stage in self.stages]
        if thresholds != sorted(thresholds):
            raise ValueError(f"score_stages thresholds {thresholds} must increase")
        return self


class EvaluatorConfig(_Strict):
    """The importance evaluator's network and training."""

    hidden: list[int] = Field(
        default_factory=lambda: [16, 16], min_length=1, description="widths of the evaluator MLP's hidden layers"
    )
    learning_rate: float = Field(1e-3, gt=0, le=1.0, description="Adam's step size for the evaluator")
    batch_size: int = Field(256, ge=1, description="samples per evaluator minibatch (pretraining and refresh)")
    pretrain_steps: int = Field(10_000, ge=1, description="env steps of baseline PPO collected for pretraining")
    pretrain_epochs: int = Field(10, ge=1, description="passes over the collected samples in pretraining")
    holdout_fraction: float = Field(
        0.2, gt=0, lt=1, description="share of the pretraining samples held out to measure the rank correlation"
    )
    champion_min_spearman: float = Field(
        0.1, ge=-1, le=1, description="registry gate: held-out rank correlation a version needs to become champion"
    )


class PivotConfig(_Strict):
    """Key-state compute skipping (PivotRL), the settings of ``selection.kind: pivot``: thresholds on the
    evaluator's score in [0, 1].

    score >= high: full compute; low <= score < high: kept with probability keep_prob and
    weighted 1 / keep_prob; score < low: skipped. During the first threshold_decay_steps env
    steps, low is raised by threshold_boost * (1 - step / threshold_decay_steps) (the seed's
    ``dynamic_threshold``), capped at high.
    """

    label: Literal["policy_gradient", "advantage", "grad_norm"] = Field(
        "policy_gradient",
        description="what the evaluator learns to predict: the policy-gradient size, |advantage|, or the exact "
        "per-sample gradient norm (slow)",
    )
    high: float = Field(0.8, ge=0.0, le=1.0, description="score >= high: the sample always gets full compute")
    low: float = Field(0.5, ge=0.0, le=1.0, description="score < low: skipped, or kept with probability p_min")
    keep_prob: float = Field(
        0.5, gt=0.0, le=1.0, description="low <= score < high: kept with this probability, weight 1 / keep_prob"
    )
    warmup_steps: int = Field(
        1000, ge=0, description="env steps with full compute for every sample first, while the evaluator learns"
    )
    min_full_fraction: float = Field(
        0.2, ge=0.0, le=1.0, description="safety margin: at least this share of the samples always gets full compute"
    )
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
    threshold_boost: float = Field(
        0.2, ge=0.0, le=1.0, description="low starts this much higher and decays to its value (fewer skips early)"
    )
    threshold_decay_steps: int = Field(10_000, ge=1, description="env steps over which threshold_boost decays to 0")
    refresh_every_updates: int = Field(
        10, ge=0, description="updates between fine-tunings of the evaluator on the current rollout; 0 = never"
    )
    refresh_epochs: int = Field(2, ge=1, description="passes over the fresh rollout at each evaluator refresh")
    evaluator_from: str | None = Field(
        None,
        description="a pretrained evaluator (path or models:/name@alias); null = a fresh one, trained during warm-up",
    )
    evaluator: EvaluatorConfig = Field(
        default_factory=EvaluatorConfig, description="the importance evaluator's network, pretraining and registry gate"
    )

    @model_validator(mode="after")
    def _ordered(self) -> PivotConfig:
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}; allowed: low <= high")
        return self


class SelectionConfig(_RegisteredKind):
    """Which samples get compute: all (plain), pivot (importance), random or epochs (the two controls)."""

    _section: ClassVar[str] = "selection"
    kind: str = Field(
        "all",
        description="a registered selector (frugalrl.selectors): all, pivot, random, epochs, advantage_top, "
        "advantage_proportional, value_error, clipped_ratio",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the selector's own settings, validated by the model it registers"
    )
    packing: Literal["rollout", "epoch", "minibatch"] = Field(
        "rollout",
        description="rollout / epoch: choose over the rollout each epoch, pack all epochs' (or each epoch's) "
        "kept samples into full minibatches (fewer optimizer steps); minibatch: thin each minibatch",
    )
