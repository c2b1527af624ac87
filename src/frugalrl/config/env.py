"""The ``env`` section: which environment, its wrappers, Atari's scoring protocol and changed physics."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from frugalrl.config._base import _registered_env, _Strict


class AtariConfig(_Strict):
    """Preprocessing of ALE games (done natively inside ale-py's vector env) and the scoring protocol.

    Evaluation plays full games (all lives), as published Atari scores do (Machado et al. 2018:
    sticky actions 0.25, a cap of 108,000 frames); training may cut the value target at a lost
    life (``life_loss``) while the game goes on.
    """

    frameskip: int = Field(4, ge=1, le=16, description="emulator frames per action, the action repeated (published: 4)")
    stack_num: int = Field(4, ge=1, le=16, description="last frames stacked into one observation (motion is visible)")
    img_size: int = Field(
        84,
        ge=36,
        le=210,
        description="frames resized to this many pixels square (at least 36: the Nature CNN's convolutions)",
    )
    grayscale: bool = Field(True, description="frames in grayscale; false = RGB (three times the input)")
    noop_max: int = Field(30, ge=0, le=1000, description="up to this many no-op actions at a reset, for varied starts")
    episodic_life: bool = Field(False, description="refused: it resets the whole game at a lost life; see life_loss")
    life_loss: bool = Field(True, description="training: a lost life ends the value target, the game goes on")
    fire_reset: bool = Field(False, description="press FIRE after each reset; off: the policy learns to serve")
    repeat_action_probability: float = Field(
        0.25, ge=0.0, le=1.0, description="sticky actions: chance the previous action repeats (published: 0.25)"
    )
    max_episode_steps: int = Field(108_000, ge=1, description="frames before a game is cut (published: 108000)")

    @field_validator("episodic_life")
    @classmethod
    def _not_single_life(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "true makes every lost life reset the whole game, so scores are single-life scores; "
                "use env.atari.life_loss: true (the value target is cut at a lost life, the game goes on)"
            )
        return value

    def protocol_deviations(self) -> list[str]:
        """How this differs from the published full-game protocol (empty: comparable with published scores)."""
        out = []
        if self.repeat_action_probability != 0.25:
            out.append(f"sticky actions {self.repeat_action_probability:g} (published: 0.25)")
        if self.max_episode_steps != 108_000:
            out.append(f"games cut at {self.max_episode_steps} frames (published: 108000)")
        if self.fire_reset:
            out.append("FIRE pressed after each reset")
        if self.frameskip != 4:
            out.append(f"frameskip {self.frameskip} (published: 4)")
        return out


class DynamicsConfig(_Strict):
    """Changed physics for a MuJoCo task (the PEFT targets): scales on the compiled model."""

    mass_scale: float = Field(1.0, gt=0, description="every body's mass times this")
    friction_scale: float = Field(1.0, gt=0, description="every geom's sliding friction times this")
    gravity: tuple[float, float, float] | None = Field(None, description="replaces the model's gravity vector")

    @property
    def changed(self) -> bool:
        return self.mass_scale != 1.0 or self.friction_scale != 1.0 or self.gravity is not None


class EnvConfig(_Strict):
    """Which environment, how many copies, and which wrappers.

    ``imports`` comes before ``id``: its modules are imported (registering their ids) before the id is checked.
    """

    imports: list[str] = Field(
        default_factory=list,
        description="modules imported first (they register env ids), installed or on PYTHONPATH; docs/own-env.md",
    )
    id: str = Field("CartPole-v1", description="a gymnasium id, or MODULE:EnvId (MODULE imported first)")
    num_envs: int = Field(8, ge=1, le=4096, description="env copies stepped together (one vector env) during training")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the env's constructor (gymnasium.make, or ale-py's)"
    )
    normalize_obs: bool = Field(
        False, description="training: observations scaled by running mean and std (saved with the policy); not Atari"
    )
    clip_obs: float = Field(10.0, gt=0, description="normalised observations are clipped to +/- this (normalize_obs)")
    normalize_reward: bool = Field(
        False,
        description="training: rewards scaled by the running std of the discounted return (as SB3's VecNormalize)",
    )
    clip_reward: float | None = Field(
        None, gt=0, description="training: rewards (after scaling) clipped to +/- this; null = not clipped"
    )
    frame_stack: int = Field(
        1, ge=1, le=16, description="last observations stacked into one (not Atari: env.atari.stack_num stacks there)"
    )
    atari: AtariConfig = Field(
        default_factory=AtariConfig, description="Atari (ALE) preprocessing and scoring protocol; read for ALE ids only"
    )
    dynamics: DynamicsConfig = Field(
        default_factory=DynamicsConfig,
        description="changed physics of a MuJoCo task (scales on mass, friction, gravity)",
    )
    batched: bool = Field(
        True,
        description="CartPole-v1: step all copies as arrays (bit-identical trajectories, faster); false = one by one",
    )

    @staticmethod
    def saved(spec: dict[str, Any]) -> dict[str, Any]:
        """A policy's saved env spec as it validates today: a policy trained with ale-py's
        ``episodic_life`` (single-life episodes, refused now) is evaluated on full games."""
        atari = spec.get("atari")
        if isinstance(atari, dict) and atari.get("episodic_life"):
            return {**spec, "atari": {**atari, "episodic_life": False}}
        return spec

    @model_validator(mode="after")
    def _atari_keys_on_atari_only(self) -> EnvConfig:
        """Atari settings on another env would be ignored silently: refused (a dump's defaults pass)."""
        if self.id.rpartition(":")[2].startswith("ALE/"):  # envs.registry.is_atari, without loading gymnasium
            return self
        defaults = AtariConfig().model_dump()
        changed = sorted(k for k, v in self.atari.model_dump().items() if v != defaults[k])
        if changed:
            raise ValueError(
                f"env.atari.{changed[0]} is set, but {self.id} is not an Atari (ALE/) game: the atari section is read "
                "for ALE ids only; remove it"
            )
        return self

    @field_validator("imports")
    @classmethod
    def _importable(cls, modules: list[str]) -> list[str]:
        _registered_env(None, modules)
        return modules

    @field_validator("id")
    @classmethod
    def _known_env(cls, value: str, info: ValidationInfo) -> str:
        if "imports" not in info.data:  # a module that failed to import has its own error already
            return value
        _registered_env(value, info.data["imports"])
        return value
