"""Free-signal selectors (``frugalrl.signals``): |advantage| (``advantage_top``, ``advantage_proportional``),
value error (``value_error``) and the clipped-ratio mask (``clipped_ratio``).

Each keeps ``keep_fraction`` of the samples it chooses from, by random skipping's rule (``random``), so a
comparison with it is at equal backward samples and optimizer steps: only which samples differ.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from frugalrl.selectors import SELECTORS, SelectorContext

if TYPE_CHECKING:  # torch stays out of config validation, which only lists the kinds
    from frugalrl.selection import SampleSelector


class _Signal(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    keep_fraction: float = Field(
        0.35,
        gt=0.0,
        le=1.0,
        description="share of the samples kept, chosen by the signal (set it as random's, for equal compute)",
    )


class AdvantageTopSettings(_Signal):  # selection.settings of advantage_top
    pass


class AdvantageProportionalSettings(_Signal):  # selection.settings of advantage_proportional
    uniform_mix: float = Field(
        0.1, gt=0.0, le=1.0, description="share of the draw's probability spread evenly: bounds the weights"
    )
    unbiased: bool = Field(True, description="weight draws 1 / (n p): the expected loss is PPO's full-batch loss")


class ValueErrorSettings(_Signal):  # selection.settings of value_error
    pass


class ClippedRatioSettings(_Signal):  # selection.settings of clipped_ratio
    pass


def _signals() -> ModuleType:
    # why here: the selectors load torch, and config validation imports this module for the kinds' settings
    from frugalrl import signals

    return signals


def _common(context: SelectorContext) -> dict[str, Any]:
    """What every signal selector takes from the run: the learner's policy and meter, packing, norm_adv."""
    return {
        "policy": context.policy,
        "meter": context.meter,
        "packing": context.config.selection.packing,
        "norm_adv": context.config.ppo.norm_adv,
        "device": context.device,
    }


@SELECTORS.register("advantage_top", settings=AdvantageTopSettings)
def advantage_top(context: SelectorContext) -> SampleSelector:
    return _signals().AdvantageTop(context.settings.keep_fraction, **_common(context))


@SELECTORS.register("advantage_proportional", settings=AdvantageProportionalSettings)
def advantage_proportional(context: SelectorContext) -> SampleSelector:
    s = context.settings
    return _signals().AdvantageProportional(
        s.keep_fraction, uniform_mix=s.uniform_mix, unbiased=s.unbiased, **_common(context)
    )


@SELECTORS.register("value_error", settings=ValueErrorSettings)
def value_error(context: SelectorContext) -> SampleSelector:
    return _signals().ValueErrorTop(context.settings.keep_fraction, **_common(context))


@SELECTORS.register("clipped_ratio", settings=ClippedRatioSettings)
def clipped_ratio(context: SelectorContext) -> SampleSelector:
    ppo = context.config.ppo
    return _signals().ClippedRatioSkip(
        context.settings.keep_fraction,
        clip_coef=ppo.clip_coef,
        anneal_clip=ppo.anneal_clip,
        total_timesteps=ppo.total_timesteps,
        **_common(context),
    )
