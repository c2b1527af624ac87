"""Hyperparameter control during training (the ``HyperController`` seam): the RMT meta-controller
and the curriculum by score."""

from frugalrl.meta.controller import Adjustment, MetaController
from frugalrl.meta.hyper import FixedHyperparameters, HyperController, build_hyper_controller
from frugalrl.meta.stages import ScoreStages

__all__ = [
    "Adjustment",
    "FixedHyperparameters",
    "HyperController",
    "MetaController",
    "ScoreStages",
    "build_hyper_controller",
]
