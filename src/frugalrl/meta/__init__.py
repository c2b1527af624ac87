"""Hyperparameter control during training (the ``HyperController`` seam): the RMT meta-controller
and the curriculum by score."""

from frugalrl.meta.controller import Adjustment, MetaController, RMTSettings
from frugalrl.meta.hyper import (
    HYPER_CONTROLLERS,
    FixedHyperparameters,
    HyperContext,
    HyperController,
    build_hyper_controller,
)
from frugalrl.meta.stages import ScoreStages

__all__ = [
    "HYPER_CONTROLLERS",
    "Adjustment",
    "FixedHyperparameters",
    "HyperContext",
    "HyperController",
    "MetaController",
    "RMTSettings",
    "ScoreStages",
    "build_hyper_controller",
]
