"""Free-signal sample selectors: skip by a signal the learner already has, at random skipping's size.

``advantage`` (|advantage|: top-k and proportional draws), ``value_error`` (|return - V| under the
current critic), ``clipped_ratio`` (samples the clip already gives no policy gradient). Their kinds and
settings are registered in ``frugalrl.selectors.signals``.
"""

from __future__ import annotations

from frugalrl.signals.advantage import AdvantageProportional, AdvantageTop
from frugalrl.signals.base import SIGNAL_PHASE, SignalSkip, kept_count, stream_pack
from frugalrl.signals.clipped_ratio import ClippedRatioSkip, inactive_distance
from frugalrl.signals.value_error import ValueErrorTop

__all__ = [
    "SIGNAL_PHASE",
    "AdvantageProportional",
    "AdvantageTop",
    "ClippedRatioSkip",
    "SignalSkip",
    "ValueErrorTop",
    "inactive_distance",
    "kept_count",
    "stream_pack",
]
