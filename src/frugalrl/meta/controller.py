"""The RMT meta-controller: watch three training signals, nudge three hyperparameters, explain each nudge.

Signals, per learner update (non-finite values are ignored, never propagated):

- **entropy change rate**: the exponential average of the per-update change of the policy's
  entropy (for DQN, the entropy of softmax(Q) over the acted states). Strongly negative means
  the policy is collapsing onto few actions.
- **value-loss convergence**: a fast and a slow exponential average of the value (TD) loss.
  Fast well above slow means the loss is rising; the two close together means it has settled.
- **exploration balance**: the current exploration value against its bounds.

Every ``interval`` updates the controller decides, by these rules:

- value loss rising -> learning rate x ``lr_down`` and gamma - ``gamma_step`` (shorter horizon,
  smaller steps: the usual cures for a diverging value function);
- value loss settled -> learning rate x ``lr_up`` and gamma + ``gamma_step``;
- entropy collapsing -> exploration x ``exploration_factor``; entropy steady while the loss has
  settled -> exploration / ``exploration_factor``.

Every value is clipped to its configured bounds after every change, whatever the inputs were.
Each change comes back as an ``Adjustment`` carrying the reason in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RMTSettings(BaseModel):
    """``meta.settings`` of kind ``rmt``: the controller's bounds, factors and tolerances."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    interval: int = Field(10, ge=1, description="updates between the controller's decisions")
    lr_bounds: tuple[float, float] = Field((1e-5, 1e-3), description="the learning rate is kept within [low, high]")
    gamma_bounds: tuple[float, float] = Field((0.9, 0.99), description="gamma is kept within [low, high]")
    exploration_bounds: tuple[float, float] = Field(
        (0.01, 0.3), description="the exploration value (DQN's epsilon after its decay) is kept within [low, high]"
    )
    lr_down: float = Field(
        0.7, gt=0.0, lt=1.0, description="the learning rate is multiplied by this when the value loss rises"
    )
    lr_up: float = Field(
        1.1, gt=1.0, le=2.0, description="the learning rate is multiplied by this when the value loss has settled"
    )
    gamma_step: float = Field(
        0.005, gt=0.0, le=0.1, description="gamma moves down (loss rising) or up (settled) by this per decision"
    )
    exploration_factor: float = Field(
        1.25, gt=1.0, le=4.0, description="exploration times this when entropy collapses, divided by it when steady"
    )
    rise_tolerance: float = Field(0.2, gt=0.0, description="fast value-loss EMA above slow by this share: rising")
    settle_tolerance: float = Field(0.05, gt=0.0, description="fast and slow value-loss EMAs this close: settled")
    collapse_rate: float = Field(0.02, gt=0.0, description="entropy falling faster than this per update: collapsing")

    @model_validator(mode="after")
    def _ordered(self) -> RMTSettings:
        for name in ("lr_bounds", "gamma_bounds", "exploration_bounds"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"{name} {low, high}: allowed 0 <= low <= high")
        return self


@dataclass
class Adjustment:
    name: str
    old: float
    new: float
    reason: str

    def line(self) -> str:
        return f"meta: {self.name} {self.old:.4g} -> {self.new:.4g} ({self.reason})"


def _clip(value: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return min(max(value, low), high)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


class MetaController:
    """The RMT controller; a ``HyperController`` (``frugalrl.meta.hyper``)."""

    technique = "meta_controller"
    uses_entropy = True  # the entropy change rate is one of its signals

    def __init__(self, config: RMTSettings, learning_rate: float, gamma: float, exploration: float):
        self.config = config
        self.values = {
            "learning_rate": _clip(learning_rate, config.lr_bounds),
            "gamma": _clip(gamma, config.gamma_bounds),
            "exploration": _clip(exploration, config.exploration_bounds),
        }
        self.bounds = {
            "learning_rate": config.lr_bounds,
            "gamma": config.gamma_bounds,
            "exploration": config.exploration_bounds,
        }
        self.entropy: float | None = None
        self.entropy_rate = 0.0
        self.loss_fast: float | None = None
        self.loss_slow: float | None = None
        self.updates = 0
        self.history: list[Adjustment] = []

    @property
    def learning_rate(self) -> float:
        return self.values["learning_rate"]

    @property
    def gamma(self) -> float:
        return self.values["gamma"]

    @property
    def exploration(self) -> float:
        return self.values["exploration"]

    def adjust(self, applied: list[Adjustment], entropy: float | None, value_loss: float | None) -> list[Adjustment]:
        """The learner's hook: nothing before learning starts (no value loss yet); otherwise take
        the stages' changes into its own values, then ``observe`` this update."""
        if value_loss is None:
            return []
        for change in applied:  # stages move the controller's values too
            self.values[change.name] = change.new
        return self.observe(entropy, value_loss)

    def observe(self, entropy: float | None, value_loss: float | None) -> list[Adjustment]:
        """Take one update's signals; every ``interval`` updates, return the adjustments made."""
        if _finite(entropy):
            if self.entropy is not None:
                self.entropy_rate = 0.9 * self.entropy_rate + 0.1 * (entropy - self.entropy)
            self.entropy = float(entropy)
        if _finite(value_loss) and value_loss >= 0:
            loss = float(min(value_loss, 1e12))
            self.loss_fast = loss if self.loss_fast is None else 0.7 * self.loss_fast + 0.3 * loss
            self.loss_slow = loss if self.loss_slow is None else 0.97 * self.loss_slow + 0.03 * loss
        self.updates += 1
        if self.updates % self.config.interval or self.loss_fast is None or self.loss_slow is None:
            return []
        return self._decide()

    def _decide(self) -> list[Adjustment]:
        cfg = self.config
        fast, slow = self.loss_fast, self.loss_slow
        changes: list[Adjustment] = []
        rising = fast > slow * (1 + cfg.rise_tolerance)
        settled = abs(fast - slow) <= cfg.settle_tolerance * max(slow, 1e-12)
        if rising:
            reason = f"value loss rising: fast EMA {fast:.3g} > slow EMA {slow:.3g} x {1 + cfg.rise_tolerance:g}"
            changes += self._set("learning_rate", self.learning_rate * cfg.lr_down, reason)
            changes += self._set("gamma", self.gamma - cfg.gamma_step, reason)
        elif settled:
            reason = f"value loss settled: fast EMA {fast:.3g} within {cfg.settle_tolerance:g} of slow {slow:.3g}"
            changes += self._set("learning_rate", self.learning_rate * cfg.lr_up, reason)
            changes += self._set("gamma", self.gamma + cfg.gamma_step, reason)
        if self.entropy_rate < -cfg.collapse_rate:
            reason = f"entropy collapsing: {self.entropy_rate:.3g} per update"
            changes += self._set("exploration", self.exploration * cfg.exploration_factor, reason)
        elif settled and abs(self.entropy_rate) < cfg.collapse_rate / 4:
            reason = f"entropy steady ({self.entropy_rate:.3g} per update) and value loss settled"
            changes += self._set("exploration", self.exploration / cfg.exploration_factor, reason)
        self.history += changes
        return changes

    def _set(self, name: str, value: float, reason: str) -> list[Adjustment]:
        old = self.values[name]
        new = _clip(value, self.bounds[name]) if math.isfinite(value) else old
        if new == old:
            return []
        self.values[name] = new
        return [Adjustment(name, old, new, reason)]

    def metrics(self) -> dict[str, float]:
        return {
            "meta_learning_rate": self.learning_rate,
            "meta_gamma": self.gamma,
            "meta_exploration": self.exploration,
            "meta_entropy_rate": self.entropy_rate,
            "meta_adjustments": float(len(self.history)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "values": dict(self.values),
            "entropy": self.entropy,
            "entropy_rate": self.entropy_rate,
            "loss_fast": self.loss_fast,
            "loss_slow": self.loss_slow,
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.values = dict(state["values"])
        self.entropy, self.entropy_rate = state["entropy"], state["entropy_rate"]
        self.loss_fast, self.loss_slow, self.updates = state["loss_fast"], state["loss_slow"], state["updates"]
