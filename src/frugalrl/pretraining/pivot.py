"""PivotRL's pretraining stage: baseline-PPO rollouts with importance labels, then the importance evaluator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.pretraining import PretrainStage, register

if TYPE_CHECKING:
    from frugalrl.config import ExperimentConfig


def _needed(config: ExperimentConfig) -> bool:
    return config.selection.kind == "pivot"


PIVOT = register(
    PretrainStage(
        name="pivot",
        produces="importance evaluator",
        description="With a pretrained importance evaluator.",
        override="selection.settings.evaluator_from",  # the current spelling, not the legacy pivot.*
        needed=_needed,
        collect="frugalrl.pivot.pretrain:collect_labelled",
        pretrain="frugalrl.pivot.pretrain:pretrain_evaluator",
        metrics=("spearman", "spearman_before", "final_loss", "train_samples", "test_samples"),
        collect_name="collect labelled rollouts",
        pretrain_name="pretrain importance evaluator",
        train_name="train policy (PivotRL)",
    )
)
