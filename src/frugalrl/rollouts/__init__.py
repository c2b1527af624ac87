"""Rollout sources by name: ``rollout.kind`` picks where a learner's experience comes from.

Each module of this package registers the sources it defines (``builtin``: ``real``, the config's
vector env behind the learner ``config.algo`` names; ``latent``, the latent curriculum's mix of real
and world-model rollouts). A factory gets a ``RolloutContext`` and returns the run's learner, not yet
started: ``frugalrl.run_setup`` starts it (or restores it from a checkpoint), the same for every
source. A new source is one new module here; see docs/architecture.md, "Adding a technique".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from frugalrl.plugins import Registry

if TYPE_CHECKING:
    import torch
    from pydantic import BaseModel

    from frugalrl.algos.base import Learner
    from frugalrl.algos.gradient_sync import GradientSync
    from frugalrl.config import ExperimentConfig
    from frugalrl.cost import CostMeter


@dataclass(frozen=True)
class RolloutContext:
    """What a source's factory gets: the run's config, its own settings, the run directory and the learner's parts."""

    config: ExperimentConfig
    settings: BaseModel | None  # ``rollout.settings`` validated by the kind's model
    out: Path  # the run directory (config.yaml already written)
    meter: CostMeter  # the run's cost meter: what the source's envs and models compute is charged here
    device: torch.device
    gradient_sync: GradientSync  # this worker's gradient synchronisation (LocalSync on one process)


RolloutFactory = Callable[[RolloutContext], "Learner"]
ROLLOUT_SOURCES: Registry[RolloutFactory] = Registry("rollout source", "rollout", __name__)


def build_run_learner(
    config: ExperimentConfig, out: Path, meter: CostMeter, device: torch.device, gradient_sync: GradientSync
) -> Learner:
    """The learner of a run in ``out``, fed by the rollout source ``rollout.kind`` names (not yet started)."""
    context = RolloutContext(config, config.rollout.built_settings(), out, meter, device, gradient_sync)
    return ROLLOUT_SOURCES.entry(config.rollout.kind).factory(context)


__all__ = ["ROLLOUT_SOURCES", "RolloutContext", "RolloutFactory", "build_run_learner"]
