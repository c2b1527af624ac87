"""Gradient reducers by name: ``distributed.kind`` picks one, ``distributed.settings`` configures it.

A reducer is a ``fusion.sync.GradientFusion``: after every backward it turns each worker's gradients
into the one gradient every worker applies. Each module of this package registers the kinds it
defines (``builtin``: topk, dense). A factory gets a ``ReducerContext`` and returns a
``GradientFusion``; ``fusion.launch.Synchronizer`` builds one per parameter group a learner steps.
A new reducer is one new module here; see docs/architecture.md, "Adding a technique".

The registry lives apart from ``fusion.sync`` so that ``builtin``, which registers sync's classes,
imports it at module level; sync does not import this package, so there is no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frugalrl.plugins import Registry

if TYPE_CHECKING:
    from pydantic import BaseModel

    from frugalrl.config import DistributedConfig
    from frugalrl.fusion.sync import GradientFusion


@dataclass(frozen=True)
class ReducerContext:
    """What a reducer factory gets: the ``distributed`` section, its own settings, the number of workers."""

    config: DistributedConfig
    settings: BaseModel | None  # ``distributed.settings`` validated by the kind's model
    world_size: int


ReducerFactory = Callable[[ReducerContext], "GradientFusion"]
REDUCERS: Registry[ReducerFactory] = Registry("gradient reducer", "distributed", __name__)


def make_reducer(config: DistributedConfig, world_size: int) -> GradientFusion:
    """The reducer ``distributed.kind`` names, built with its settings for ``world_size`` workers."""
    context = ReducerContext(config, config.built_settings(), world_size)
    return REDUCERS.entry(config.kind).factory(context)


__all__ = ["REDUCERS", "ReducerContext", "ReducerFactory", "make_reducer"]
