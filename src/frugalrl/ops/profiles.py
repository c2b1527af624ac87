"""Production profiles (``profiles/*.yaml``): which config each stage of the production DAG trains, at
which budget, and what a GPU stage asks Kubernetes for.

A profile is typed like an experiment config (``frugalrl.config``): unknown keys are refused, every
default is written on the model below, and anything wrong is a one-line ``ConfigError`` naming the
file, the key and the fix. ``load_profile`` also loads each stage's experiment config, so a profile
whose stages cannot run (latent off, no peft section, no MLflow model to register) fails here, at
compile time, before any step starts. Building the Kubeflow graph from it is ``pipelines/``'s job:
this module never imports kfp.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator

from frugalrl.config import ExperimentConfig, _describe, _Strict, load_config, read_text_file, yaml_mapping
from frugalrl.credentials import redact_data, redact_text
from frugalrl.errors import ConfigError

# The patterns kfp's PipelineTask.set_cpu_*/set_memory_* accept, checked here so that a bad value is a
# one-line error at load time rather than a kfp traceback at compile time.
_CPU = re.compile(r"([0-9]*[.])?[0-9]+m?$")
_MEMORY = re.compile(r"^[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki){0,1}$")


class Resources(_Strict):
    """What every training and pretraining stage of a ``gpu: true`` profile asks for; unused otherwise.

    The node selector and toleration are the compiled pipeline's defaults for its ``gpu_node_selector``
    and ``gpu_toleration`` parameters (a run can still pass others): the names are the cluster's.
    """

    gpu_count: int = Field(1, ge=1, description="nvidia.com/gpu per stage")
    cpu_request: str = Field("2", description="Kubernetes CPU quantity: cores (4, 0.5) or millicores (500m)")
    cpu_limit: str = "4"
    memory_request: str = Field("8G", description="Kubernetes memory quantity: a number, optionally E/P/T/G/M/K(i)")
    memory_limit: str = "16G"
    node_selector: dict[str, str] = Field(
        default_factory=lambda: {"cloud.google.com/gke-nodepool": "gpu-pool"},
        description="the GPU node pool's labels",
    )
    toleration: dict[str, str] = Field(
        default_factory=lambda: {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        description="lets GPU stages onto the tainted GPU pool",
    )

    @field_validator("cpu_request", "cpu_limit", "memory_request", "memory_limit", mode="before")
    @classmethod
    def _number_as_text(cls, value: Any) -> Any:
        # YAML reads `cpu_limit: 8` as an int; Kubernetes quantities are strings
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("cpu_request", "cpu_limit")
    @classmethod
    def _cpu(cls, value: str) -> str:
        if not _CPU.match(value):
            raise ValueError("not a Kubernetes CPU quantity; use cores such as 4 or 0.5, or millicores such as 500m")
        return value

    @field_validator("memory_request", "memory_limit")
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _MEMORY.match(value):
            raise ValueError("not a Kubernetes memory quantity; use an integer with an optional unit, such as 16G")
        return value


class ProfileStage(_Strict):
    """One branch of the production DAG: an experiment config, its overrides, its registered model."""

    config: str = Field(description="experiment YAML, relative to the checkout root")
    overrides: list[str] = Field(default_factory=list, description="--set overrides, applied to the config")
    model_name: str = Field(min_length=1, description="the registered MLflow model this stage promotes")
    adapted_model_name: str = Field("", description="PEFT: the best adapted policy; default <model_name>-adapted")
    eval_episodes: int | None = Field(
        None, ge=2, description="this stage's promotion gate plays this many episodes instead of the pipeline's "
        "eval_episodes parameter (Atari: 30 full games, as published scores are)",
    )  # fmt: skip

    @property
    def adapted_name(self) -> str:
        return self.adapted_model_name or f"{self.model_name}-adapted"


class TuneStage(_Strict):
    """Optuna workers (a ParallelFor sharing one study) before the train stage, when its config has ``tuning``."""

    workers: int = Field(0, ge=0, description="0: no tune stage")
    overrides: list[str] = Field(default_factory=list, description="added to the train stage's overrides")


class Stages(_Strict):
    train: ProfileStage | None = None
    tune: TuneStage = Field(default_factory=TuneStage)
    latent: ProfileStage | None = None
    peft: ProfileStage | None = None


class Profile(_Strict):
    """A production profile; ``load_profile`` builds one and checks its stages' configs."""

    name: str = Field(min_length=1, description="the pipeline is frugalrl-production-<name>")
    gpu: bool = Field(False, description="true: training and pretraining stages run on the GPU pool")
    resources: Resources = Field(default_factory=Resources)
    stages: Stages = Field(default_factory=Stages)
    # Where stage configs are resolved (the checkout root): set by validate_profile, never read from YAML.
    _root: Path = PrivateAttr(default_factory=Path)

    @property
    def train(self) -> ProfileStage | None:
        return self.stages.train

    @property
    def latent(self) -> ProfileStage | None:
        return self.stages.latent

    @property
    def peft(self) -> ProfileStage | None:
        return self.stages.peft

    @property
    def tune(self) -> TuneStage:
        return self.stages.tune

    def stage_config(self, stage: ProfileStage) -> ExperimentConfig:
        """The stage's experiment config with its overrides, validated."""
        return load_config(self._root / stage.config, stage.overrides)

    def stage_text(self, stage: ProfileStage) -> str:
        """The stage's config file as text, credentials redacted: what the pipeline's steps receive
        (and a compiled pipeline holds); their real values reach the steps by environment."""
        return redact_text((self._root / stage.config).read_text())


def validate_profile(data: Any, source: str, root: Path) -> Profile:
    """A parsed profile mapping as a ``Profile``, or a one-line ``ConfigError``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    try:
        profile = Profile.model_validate(redact_data(data))  # stage overrides hold no credential
    except ValidationError as exc:
        errors = exc.errors()
        raise ConfigError(_describe(errors[0], source, len(errors) - 1, Profile)) from None
    profile._root = root
    return profile


def load_profile(name_or_path: str, root: Path) -> Profile:
    """A profile by name (``quick`` is ``root/profiles/quick.yaml``) or path, with every stage's config checked.

    Stage configs are resolved against ``root`` (the checkout), wherever the profile file lies.
    """
    profiles = root / "profiles"
    path = Path(name_or_path)
    if not path.suffix:
        path = profiles / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in profiles.glob("*.yaml"))
        raise ConfigError(f"profile {name_or_path!r} not found; known profiles: {known}")
    text = read_text_file(path, "profile", "profiles/quick.yaml")
    profile = validate_profile(yaml_mapping(text, f"profile {path.name}", "profile"), f"profile {path.name}", root)
    for key in ("train", "latent", "peft"):
        stage = getattr(profile.stages, key)
        if stage is None:
            continue
        config = profile.stage_config(stage)
        if key == "latent" and not config.latent_curriculum:
            raise ConfigError(
                f"profile {path.name}: stage latent uses {stage.config}, whose rollout.kind is not latent"
            )
        if key == "peft" and config.peft is None:
            raise ConfigError(f"profile {path.name}: stage peft uses {stage.config}, which has no peft section")
        if stage.eval_episodes is not None and stage.eval_episodes < config.promotion.min_episodes:
            raise ConfigError(
                f"profile {path.name}: stage {key} sets eval_episodes {stage.eval_episodes}, fewer than its config's "
                f"promotion.min_episodes {config.promotion.min_episodes}, so its gate could never promote; "
                f"set eval_episodes to at least {config.promotion.min_episodes}"
            )
        if not (config.tracking.enabled and config.tracking.log_model):  # the registry is where stages meet
            raise ConfigError(
                f"profile {path.name}: stage {key} registers {stage.model_name!r} but {stage.config} logs no "
                "MLflow model; add tracking.enabled=true to the stage's overrides"
            )
    return profile
