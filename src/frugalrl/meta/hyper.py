"""The ``HyperController`` seam: what an off-policy learner asks after every update.

After each update the learner hands the controller the changes the score stages just made,
its exploration signal (an entropy) and its value loss (``None`` before learning starts), and
applies the adjustments that come back (learning rate, gamma, exploration). Between updates
``exploration`` is the controller's exploration value (DQN's epsilon once its decay is over),
or ``None`` when the controller has no say. ``FixedHyperparameters`` is the default: it never
changes anything. ``MetaController`` (``meta.enabled``) is the RMT controller. A new controller
implements this protocol in its own module and is passed to the learner as ``hyper=``.
"""

from __future__ import annotations

from typing import Any, Protocol

from frugalrl.config import MetaConfig
from frugalrl.meta.controller import Adjustment, MetaController


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


def build_hyper_controller(
    config: MetaConfig, learning_rate: float, gamma: float, exploration: float
) -> HyperController:
    """The controller the ``meta`` section asks for, starting from the learner's values."""
    if config.enabled:
        return MetaController(config, learning_rate, gamma, exploration)
    return FixedHyperparameters()
