"""Hyperparameter control during training (the ``HyperController`` seam): the RMT meta-controller
and the curriculum by score."""

from frugalrl.meta.controller import Adjustment, MetaController
from frugalrl.meta.stages import ScoreStages

__all__ = ["Adjustment", "MetaController", "ScoreStages"]
