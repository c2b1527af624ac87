"""PivotRL's importance selector (``pivot``); its settings (``selection.settings``) are a ``PivotConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.config import PivotConfig
from frugalrl.selectors import SELECTORS, SelectorContext

if TYPE_CHECKING:
    from frugalrl.selection import SampleSelector


@SELECTORS.register("pivot", settings=PivotConfig)
def importance(context: SelectorContext) -> SampleSelector:
    # why here: the evaluator pulls in the networks (torch), and config validation imports this module for the settings
    from frugalrl.pivot import ImportanceSelector, initial_evaluator

    pivot: PivotConfig = context.settings
    evaluator, note = initial_evaluator(pivot, context.observation_space)
    if pivot.evaluator_from is not None:  # its pretraining, made elsewhere, is this run's shared cost
        context.meter.add_pretrained(f"evaluator {pivot.evaluator_from}", evaluator.pretrain_flops)
    print(f"pivot: {note}")
    return ImportanceSelector(
        pivot, evaluator, context.policy, context.meter, context.device, context.config.selection.packing
    )
