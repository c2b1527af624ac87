"""The ``peft`` section: the targets and methods of a PEFT comparison (``frugalrl peft compare``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from frugalrl.config._base import _registered_env, _Strict
from frugalrl.config.env import DynamicsConfig
from frugalrl.errors import ConfigError


class PeftTarget(_Strict):
    """A changed task to transfer the source policy to: new physics, or a sibling env id."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="the target's name in the comparison's table and run directories"
    )
    env_id: str | None = Field(
        None, description="a sibling task's env id (e.g. another MuJoCo robot); null = the source's env"
    )
    dynamics: DynamicsConfig = Field(
        default_factory=DynamicsConfig, description="the target's changed physics (mass, friction, gravity)"
    )

    @field_validator("env_id")
    @classmethod
    def _known_env(cls, value: str | None) -> str | None:
        return None if value is None else _registered_env(value)


class PeftConfig(_Strict):
    """``frugalrl peft compare``: fine-tune a source policy on each target with each method."""

    source: str | None = Field(
        None, description="a run directory or models:/NAME@ALIAS of a SAC run; null: train one with this config"
    )
    min_source_return: float | None = Field(
        None,
        description="refuse a source policy whose evaluation is below this (fine-tuning a weak one compares nothing)",
    )
    targets: list[PeftTarget] = Field(
        default_factory=list, min_length=1, description="the changed tasks the source policy is fine-tuned to"
    )
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"full": {}, "lora": {}, "bitfit": {}},
        description="the methods compared: method name -> its options (empty: the defaults listed below)",
    )
    references: list[Literal["none", "scratch"]] = Field(
        default_factory=list,
        description="contenders beside the methods: none (the source policy as it is) and scratch (SAC from "
        "fresh networks on the target, the same env-step budget and evaluation)",
    )
    seeds: int = Field(3, ge=1, description="fine-tuning runs per method and target (seeds 1 to this)")
    steps: int = Field(20_000, ge=1, description="env steps of fine-tuning per method, target and seed")
    warmup_steps: int = Field(
        1_000, ge=0, description="env steps the source policy collects before fine-tuning updates start"
    )
    learning_rate: float = Field(3e-4, gt=0, description="SAC's learning rate while fine-tuning")
    adapt_critic: bool = Field(True, description="the method adapts the critics too (else they train fully)")
    eval_episodes: int = Field(
        5, ge=1, description="evaluation episodes of each fine-tuned policy, on target and source"
    )

    @field_validator("references")
    @classmethod
    def _distinct_references(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"name each reference once, not {value}")
        return value

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from frugalrl.peft import methods  # why here: it loads torch, which a plain config does not need

        known = methods.method_names()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown PEFT method(s) {unknown}; allowed: {known}")
        if not value:
            raise ValueError(f"name at least one method; allowed: {known}")
        for name, options in value.items():  # typed here, not after the source policy has trained
            try:
                methods.resolve_options(name, options)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value
