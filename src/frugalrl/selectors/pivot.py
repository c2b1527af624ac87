"""PivotRL's importance selector (``pivot``); its settings are the config's ``pivot`` section."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.selectors import SELECTORS, SelectorContext

if TYPE_CHECKING:
    from frugalrl.selection import SampleSelector


@SELECTORS.register("pivot")
def importance(context: SelectorContext) -> SampleSelector:
    # imported here: the evaluator pulls in the networks, and config validation lists kinds only
    from frugalrl.pivot import ImportanceSelector, initial_evaluator

    config = context.config
    evaluator, note = initial_evaluator(config.pivot, context.observation_space)
    if config.pivot.evaluator_from is not None:  # its pretraining, made elsewhere, is this run's shared cost
        context.meter.add_pretrained(f"evaluator {config.pivot.evaluator_from}", evaluator.pretrain_flops)
    print(f"pivot: {note}")
    return ImportanceSelector(
        config.pivot, evaluator, context.policy, context.meter, context.device, config.selection.packing
    )
