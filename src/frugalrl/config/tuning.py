"""The ``tuning`` section: Optuna's search space and study settings (``frugalrl tune``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from frugalrl.config._base import _Strict


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
