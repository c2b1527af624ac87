"""Key-state compute skipping (PivotRL): score states by importance, compute only what matters.

``ImportanceEvaluator`` scores states; ``ImportanceSelector`` is the PPO ``SampleSelector``
that keeps, down-samples or skips each sample by its score; ``pretrain_evaluator`` trains an
evaluator on labelled rollouts of baseline PPO before the main run.
"""

from __future__ import annotations

from typing import Any

from frugalrl.config import PivotConfig
from frugalrl.pivot.evaluator import (
    ImportanceEvaluator,
    adapt_to,
    build_evaluator,
    load_evaluator,
    save_evaluator,
)
from frugalrl.pivot.scheduler import ImportanceSelector, fit_evaluator
from frugalrl.tracking.artifacts import resolve_artifact


def load_evaluator_uri(uri: str) -> ImportanceEvaluator:
    """An evaluator from a path (file or run directory) or an MLflow model URI (``models:/...``)."""
    fix = "register one with `frugalrl pretrain evaluator`"
    return load_evaluator(resolve_artifact(uri, "evaluator.pt", "evaluator", fix))


def initial_evaluator(config: PivotConfig, obs_space: Any) -> tuple[ImportanceEvaluator, str]:
    """A fresh evaluator, or the pretrained one of ``selection.settings.evaluator_from`` adapted to this task."""
    if config.evaluator_from is None:
        return build_evaluator(obs_space, config.evaluator.hidden), "evaluator trained from scratch during warm-up"
    evaluator, note = adapt_to(load_evaluator_uri(config.evaluator_from), obs_space)
    return evaluator, f"evaluator from {config.evaluator_from}: {note}"


__all__ = [
    "ImportanceEvaluator",
    "ImportanceSelector",
    "adapt_to",
    "build_evaluator",
    "fit_evaluator",
    "initial_evaluator",
    "load_evaluator",
    "load_evaluator_uri",
    "save_evaluator",
]
