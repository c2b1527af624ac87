"""Plain PPO (``all``) and PivotRL's two equal-compute controls (``random``, ``epochs``)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from frugalrl.selectors import SELECTORS, SelectorContext

if TYPE_CHECKING:  # torch stays out of config validation, which only lists the kinds
    from frugalrl.selection import SampleSelector


class KeepFraction(BaseModel):  # selection.settings of the two controls
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    keep_fraction: float = Field(
        0.35, gt=0.0, le=1.0, description="random: share of samples kept; epochs: share of the epochs' samples"
    )


def _selection() -> ModuleType:
    # why here: selection loads torch, and config validation imports this module for the kinds' settings
    from frugalrl import selection

    return selection


@SELECTORS.register("all")
def all_samples(context: SelectorContext) -> SampleSelector:
    return _selection().AllSamples(context.device)


@SELECTORS.register("random", settings=KeepFraction)
def random_skip(context: SelectorContext) -> SampleSelector:
    return _selection().RandomSkip(context.settings.keep_fraction, context.config.selection.packing, context.device)


@SELECTORS.register("epochs", settings=KeepFraction)
def fewer_epochs(context: SelectorContext) -> SampleSelector:
    return _selection().FewerEpochs(context.settings.keep_fraction, context.device)
