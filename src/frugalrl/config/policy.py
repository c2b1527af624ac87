"""The ``policy`` section: the network's shape and the PEFT adapter on it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from frugalrl.config._base import _Strict


class AdapterSpec(_Strict):
    """One parameter-efficient fine-tuning method with its options (``frugalrl.peft.methods.PEFT_METHODS``)."""

    method: str = Field(description="a registered PEFT method (docs/peft.md): lora, bitfit, adapter, ...")
    options: dict[str, Any] = Field(
        default_factory=dict, description="the method's options, as under peft.methods.METHOD (e.g. rank: 8)"
    )

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        from frugalrl.peft import methods  # why here: it loads torch, which a plain config does not need

        if value not in methods.method_names():
            raise ValueError(f"unknown PEFT method {value!r}; allowed: {methods.method_names()}")
        return value


class PolicyConfig(_Strict):
    """Network shape. ``kind: auto`` picks Nature-CNN for images, MLP otherwise."""

    kind: Literal["auto", "mlp", "cnn"] = Field(
        "auto", description="the torso: auto = the Nature CNN for image observations, an MLP otherwise"
    )
    hidden: list[int] = Field(
        default_factory=lambda: [64, 64],
        min_length=1,
        description="widths of each MLP's hidden layers (actor and critic alike), first to last",
    )
    activation: Literal["tanh", "relu"] = Field("tanh", description="the MLP's activation between layers")
    log_std_init: float = Field(
        0.0, description="PPO on continuous actions: the Gaussian's starting log standard deviation (0 = std 1)"
    )
    ortho_init: bool = Field(True, description="orthogonal init (PPO); false = PyTorch default (SB3 DQN/SAC)")
    block: Literal["plain", "fractal", "residual"] = Field(
        "plain",
        description="fractal: the RMT seed's x + x1 + x2 blocks (MLP: after the first layer); residual: the "
        "standard x + x2 block on the same layers, fractal's control",
    )
    adapter: AdapterSpec | None = Field(None, description="a PEFT adapter on the network (set by `peft apply`)")

    @model_validator(mode="after")
    def _fractal_widths(self) -> PolicyConfig:
        if self.block != "plain" and len(set(self.hidden)) > 1:
            raise ValueError(f"policy.block {self.block} keeps one width; hidden {self.hidden} must repeat one size")
        return self

    @field_validator("hidden")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(h < 1 for h in value):
            raise ValueError("every hidden size must be >= 1")
        return value
