"""Replay stores by name: ``replay.kind`` picks one, ``replay.settings`` configures a new one.

Each module of ``frugalrl.replay`` registers the stores it defines (``stores``: uniform,
prioritized, tiered). A factory gets the shared transition storage, the run's seed, the
``replay`` config section and its validated settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frugalrl.plugins import Registry

# (storage: TransitionStorage, seed, config: ReplayConfig, settings) -> ReplayStore; the store
# modules import this one, so the types stay unnamed here
ReplayFactory = Callable[[Any, int, Any, Any], Any]
REPLAY_STORES: Registry[ReplayFactory] = Registry("replay store", "replay", "frugalrl.replay")
