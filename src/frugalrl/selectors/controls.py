"""Plain PPO (``all``) and PivotRL's two equal-compute controls (``random``, ``epochs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.selectors import SELECTORS, SelectorContext

if TYPE_CHECKING:  # torch stays out of config validation, which only lists the kinds
    from frugalrl.selection import SampleSelector


@SELECTORS.register("all")
def all_samples(context: SelectorContext) -> SampleSelector:
    from frugalrl.selection import AllSamples

    return AllSamples(context.device)


@SELECTORS.register("random")
def random_skip(context: SelectorContext) -> SampleSelector:
    from frugalrl.selection import RandomSkip

    selection = context.config.selection
    return RandomSkip(selection.keep_fraction, selection.packing, context.device)


@SELECTORS.register("epochs")
def fewer_epochs(context: SelectorContext) -> SampleSelector:
    from frugalrl.selection import FewerEpochs

    return FewerEpochs(context.config.selection.keep_fraction, context.device)
