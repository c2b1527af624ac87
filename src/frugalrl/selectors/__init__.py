"""Sample selectors by name: ``selection.kind`` picks one, ``selection.settings`` configures it.

Each module of this package registers the kinds it defines (``controls``: all, random,
epochs; ``pivot``: PivotRL importance; ``signals``: the free-signal selectors of
``frugalrl.signals``). A new selector is one new module here; see docs/architecture.md,
"Adding a technique".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frugalrl.plugins import Registry

if TYPE_CHECKING:
    import torch
    from pydantic import BaseModel

    from frugalrl.config import ExperimentConfig
    from frugalrl.cost import CostMeter
    from frugalrl.selection import SampleSelector


@dataclass(frozen=True)
class SelectorContext:
    """What a selector factory may use: the run's config, its own settings, the learner's parts."""

    config: ExperimentConfig
    settings: BaseModel | None  # ``selection.settings`` validated by the kind's model
    policy: torch.nn.Module  # the learner's policy (a selector may score states with it)
    observation_space: Any  # one env's observation space
    meter: CostMeter  # a selector that runs its own networks charges them here
    device: torch.device


SelectorFactory = Callable[[SelectorContext], "SampleSelector"]
SELECTORS: Registry[SelectorFactory] = Registry("sample selector", "selection", __name__)


__all__ = ["SELECTORS", "SelectorContext", "SelectorFactory"]
