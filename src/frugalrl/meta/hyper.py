"""The ``HyperController`` seam: what an off-policy learner asks after every update.

After each update the learner hands the controller the changes the score stages just made,
its exploration signal (an entropy) and its value loss (``None`` before learning starts), and
applies the adjustments that come back (learning rate, gamma, exploration). Between updates
``exploration`` is the controller's exploration value (DQN's epsilon once its decay is over),
or ``None`` when the controller has no say. ``FixedHyperparameters`` is the default: it never
changes anything. ``MetaController`` (``meta.kind: rmt``) is the RMT controller. ``meta.kind`` names
a controller registered in ``HYPER_CONTROLLERS``; a new one is a module of ``frugalrl.meta`` that
implements this protocol and registers a factory (docs/architecture.md, "Adding a technique"), or an
object passed to the learner as ``hyper=``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from frugalrl.config import MetaConfig
from frugalrl.meta.controller import Adjustment, MetaController, RMTSettings
from frugalrl.plugins import Registry


class HyperController(Protocol):
    technique: str | None  # its name in summary.json's ``techniques``; None for none
    uses_entropy: bool  # whether the learner must measure its exploration signal for it
    exploration: float | None

    def adjust(self, applied: list[Adjustment], entropy: float | None, value_loss: float | None) -> list[Adjustment]:
        """This update's adjustments; ``applied`` are the changes made elsewhere (score stages)."""

    def metrics(self) -> dict[str, float]:
        """Per-update figures for metrics.jsonl."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class FixedHyperparameters:
    """No controller: the configured values hold (only the score stages move them)."""

    technique = None
    uses_entropy = False
    exploration: float | None = None

    def adjust(self, applied: list[Adjustment], entropy: float | None, value_loss: float | None) -> list[Adjustment]:
        return []

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@dataclass(frozen=True)
class HyperContext:
    """What a controller factory gets: its settings and the learner's starting values."""

    settings: BaseModel | None  # ``meta.settings`` validated by the kind's model
    learning_rate: float
    gamma: float
    exploration: float | None  # the learner's exploration value; None: the learner has none to start from


HyperFactory = Callable[[HyperContext], HyperController]
HYPER_CONTROLLERS: Registry[HyperFactory] = Registry("hyper controller", "meta", "frugalrl.meta")


@HYPER_CONTROLLERS.register("fixed")
def fixed(context: HyperContext) -> HyperController:
    return FixedHyperparameters()


@HYPER_CONTROLLERS.register("rmt", settings=RMTSettings)
def rmt(context: HyperContext) -> HyperController:
    settings: RMTSettings = context.settings  # type: ignore[assignment]
    exploration = settings.exploration_bounds[0] if context.exploration is None else context.exploration
    return MetaController(settings, context.learning_rate, context.gamma, exploration)


def build_hyper_controller(
    config: MetaConfig, learning_rate: float, gamma: float, exploration: float | None
) -> HyperController:
    """The controller registered under ``meta.kind``, starting from the learner's values."""
    context = HyperContext(config.built_settings(), learning_rate, gamma, exploration)
    return HYPER_CONTROLLERS.entry(config.kind).factory(context)
