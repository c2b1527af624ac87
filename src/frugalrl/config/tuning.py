"""The ``tuning`` section: Optuna's search space and study settings (``frugalrl tune``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from frugalrl.config._base import _Strict


class SearchDimension(_Strict):
    """One tuned value: a float or int range (``log`` for learning rates), or a list of choices."""

    type: Literal["float", "int", "categorical"] = Field(
        "float", description="a float or int range (low, high), or categorical (choices)"
    )
    low: float | None = Field(None, description="float and int: the range's lowest value")
    high: float | None = Field(None, description="float and int: the range's highest value")
    log: bool = Field(False, description="sample the range on a log scale (learning rates); needs low > 0")
    choices: list[Any] | None = Field(None, description="categorical: the values to choose from")

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
    space: dict[str, SearchDimension] = Field(
        default_factory=dict, description="what is searched: a dotted config key (ppo.learning_rate) -> its dimension"
    )
    metric: Literal["eval_mean", "eval_iqm"] = Field(
        "eval_mean", description="the summary.json figure each trial maximises: mean or interquartile mean return"
    )
    pruner: Literal["median", "none"] = Field(
        "median",
        description="median: stop a trial whose return is below the median of earlier rounds' trials; none: never",
    )
    report_every_updates: int = Field(
        5, ge=1, description="updates between a trial's reports of its running return (what the pruner compares)"
    )
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
    study_name: str | None = Field(None, description="the Optuna study's name; null = the config's name")
    max_retry: int = Field(2, ge=0, description="a crashed worker's trial is re-queued up to this many times")
    heartbeat_s: int = Field(
        10, ge=1, description="seconds between a trial's heartbeats; one silent for 3 x this is failed (and re-queued)"
    )

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
