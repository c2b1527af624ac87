"""How a run is evaluated, distributed, checkpointed, tracked in MLflow and promoted in its registry."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from frugalrl.config._base import _RegisteredKind, _Strict

MAX_EVAL_EPISODES = 10_000  # 30 are the field's Atari protocol; far more is a typo, not a plan (hours of play)


class EvalConfig(_Strict):
    """The evaluation at the end of training, and the evaluations during it."""

    episodes: int = Field(
        20, ge=1, le=MAX_EVAL_EPISODES, description="episodes of the final evaluation (Atari's protocol plays 30)"
    )
    deterministic: bool = Field(True, description="act with the policy's most likely action; false = sample actions")
    seed: int = Field(
        10_000,
        ge=0,
        description="episode i of an evaluation starts from env seed seed + i, so evaluations compare on equal seeds",
    )
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
    workers: int = Field(
        1, ge=1, le=64, description="training processes, each with its own envs; > 1 runs under torchrun (--workers)"
    )
    kind: str = Field("topk", description="a registered gradient reducer (frugalrl.fusion.reducers): topk, dense")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the reducer's own settings, validated by the model it registers"
    )
    # top-k fusion's momentum, clip and value type: read by topk alone, yet here rather than in its settings, where
    # they were left when the reducer seam came (moving them now is a new schema version: config/schema.py)
    beta: float = Field(
        0.0, ge=0.0, lt=1.0, description="topk: momentum of the fused gradient, g = beta g + (1 - beta) mean; 0 = none"
    )
    clip: float = Field(
        0.0, ge=0.0, description="topk: the fused gradient's norm is clipped to this at step 0 (0 = no clipping)"
    )
    clip_decay: float = Field(
        0.999, gt=0.0, le=1.0, description="topk: the clip threshold is multiplied by this after every step"
    )
    value_dtype: Literal["float32", "float16"] = Field(
        "float16",
        description="topk: the type of the gradient values sent (float16 halves the traffic; indices: int16 or int32)",
    )
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="torch.distributed's backend; auto = nccl on CUDA, gloo on the CPU"
    )
    timeout_s: int = Field(
        120, ge=5, description="seconds a collective waits for the other workers before the job fails (a dead worker)"
    )


class CheckpointConfig(_Strict):
    """The run's checkpoint, from which ``frugalrl train --resume`` continues."""

    every_updates: int = Field(
        50, ge=1, description="write the checkpoint every this many updates (and after the last); lower loses less"
    )


class TrackingConfig(_Strict):
    """MLflow: the store is ``MLFLOW_TRACKING_URI`` (else ``mlflow.db`` in the working directory)."""

    enabled: bool = Field(True, description="log the run to MLflow; false = the run directory's files only")
    experiment: str = Field("frugalrl", description="the MLflow experiment the run is logged under")
    log_model: bool = Field(
        True, description="log the trained policy as an MLflow model (summary.json's model_uri), ready to register"
    )
    timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="seconds one request to the MLflow server may take; the seconds a database "
        "store (and a tuning study's database) gets to accept the first connection",
    )
    retries: int = Field(
        2,
        ge=0,
        le=10,
        description="retries of a failed MLflow request (1 s, 2 s, ... apart) before the server counts as away",
    )
    reconnect_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="seconds between a run's checks whether an away MLflow server is back (what waits is kept)",
    )


class PromotionConfig(_Strict):
    """The registry's promotion gate (``frugalrl.ops.promotion``): statistical support or no promotion."""

    test: Literal["welch", "bootstrap"] = Field(
        "welch",
        description="welch: a one-sided t-test (paired with pair_seeds); bootstrap: a paired bootstrap interval",
    )
    alpha: float = Field(0.05, gt=0.0, lt=0.5, description="significance level (welch) / interval tail (bootstrap)")
    min_improvement: float = Field(
        0.0, ge=0.0, description="the challenger must beat the champion's mean return by more than this"
    )
    min_episodes: int = Field(
        5, ge=2, description="a challenger evaluated on fewer episodes than this is never promoted"
    )
    pair_seeds: bool = Field(
        True, description="welch: when both evaluations ran on the same seeds, a paired t-test on per-seed differences"
    )
