"""How a run is evaluated, distributed, checkpointed, tracked in MLflow and promoted in its registry."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from frugalrl.config._base import _RegisteredKind, _Strict

MAX_EVAL_EPISODES = 10_000  # 30 are the field's Atari protocol; far more is a typo, not a plan (hours of play)


class EvalConfig(_Strict):
    episodes: int = Field(20, ge=1, le=MAX_EVAL_EPISODES)
    deterministic: bool = True
    seed: int = Field(10_000, ge=0, description="episode i uses seed + i")
    every_steps: int = Field(
        0,
        ge=0,
        description="evaluate every this many env steps during training, on an env of its own (0: off); the "
        "best policy so far is kept as best_policy.pt. Not counted in cpu_budget_s",
    )
    during_episodes: int = Field(
        5, ge=1, le=MAX_EVAL_EPISODES, description="episodes of each evaluation during training (seeds seed + i)"
    )
    policy: Literal["last", "best"] = Field(
        "last",
        description="the policy the evaluate-and-register stage and `frugalrl evaluate RUN` use: last (policy.pt) "
        "or best (best_policy.pt, the best evaluation during training; needs every_steps > 0)",
    )

    @model_validator(mode="after")
    def _best_needs_evaluations(self) -> EvalConfig:
        if self.policy == "best" and self.every_steps == 0:
            raise ValueError("policy best is the best evaluation during training; set eval.every_steps > 0")
        return self


class DistributedConfig(_RegisteredKind):
    """Multi-worker training (``frugalrl.fusion``): workers > 1 runs under torchrun, gradients combined by the
    gradient reducer ``kind`` names (top-k fusion, or a dense all-reduce as the baseline)."""

    _section: ClassVar[str] = "distributed"
    workers: int = Field(1, ge=1, le=64)
    kind: str = Field("topk", description="a registered gradient reducer (frugalrl.fusion.reducers): topk, dense")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the reducer's own settings, validated by the model it registers"
    )
    # top-k fusion's momentum, clip and value type: read by topk alone, yet kept here rather than moved into its
    # settings, so that the many configs and checkpoints that set them keep their keys and their hash
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


class PromotionConfig(_Strict):
    """The registry's promotion gate (``frugalrl.ops.promotion``): statistical support or no promotion."""

    test: Literal["welch", "bootstrap"] = "welch"
    alpha: float = Field(0.05, gt=0.0, lt=0.5, description="significance level (welch) / interval tail (bootstrap)")
    min_improvement: float = Field(0.0, ge=0.0, description="the return margin the challenger must beat")
    min_episodes: int = Field(5, ge=2, description="fewer evaluation episodes than this never promote")
    pair_seeds: bool = Field(
        True, description="welch: when both evaluations ran on the same seeds, a paired t-test on per-seed differences"
    )
