"""Pretraining stages: what a technique trains before the policy, declared once, here.

A technique that needs something trained before its policy (PivotRL's importance evaluator, the
latent curriculum's encoder and world model) declares a ``PretrainStage`` in its own module of
this package: which configs need it, the library calls that collect its data and train it, what
it produces, and the config override that points the training step at the produced artifact.
The pipelines read only these declarations: every training pipeline and production branch builds
``collect -> pretrain -> train`` through the same generic components, so a new technique with a
pretraining stage is one module dropped here and touches nothing under ``pipelines/`` or
``components/`` (docs/architecture.md, "A technique with a pretraining stage").

Declarations name their library calls as ``"module:function"`` strings, resolved only when a step
runs: discovering the stages (what compiling a pipeline does) imports no torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frugalrl.errors import ConfigError
from frugalrl.plugins import add_once

if TYPE_CHECKING:
    from frugalrl.config import ExperimentConfig


@dataclass(frozen=True)
class PretrainStage:
    """One pretraining stage: collect a dataset, train on it, point training at the result."""

    name: str  # the technique's name: the pipeline frugalrl-train-<name>, and the stage parameter of the steps
    produces: str  # what the stage makes: "importance evaluator"
    description: str  # the sentence its training pipeline's description ends with
    override: str  # the config key given the produced artifact's path: "selection.settings.evaluator_from"
    needed: Callable[[ExperimentConfig], bool]  # whether a config needs this stage before training
    # "module:function" (config, dataset_path) -> {"sha256", "samples", "env_id", "kind", ...}: writes the dataset
    collect: str
    # "module:function" (config, out_dir, dataset_path) -> summary with "dataset_sha256" and "model_uri"
    pretrain: str
    metrics: tuple[str, ...] = ()  # summary keys the pretrain step reports as metrics, where present
    collect_name: str = "collect pretraining data"  # the steps' display names in a pipeline
    pretrain_name: str = "pretrain"
    train_name: str = "train policy"
    replaces: tuple[str, ...] = ()  # stages this one specialises: where both are needed, this one runs

    def point_at(self, artifact_path: str) -> str:
        """The override that makes the training step load what this stage produced at ``artifact_path``."""
        return f"{self.override}={artifact_path}"


def _call(reference: str) -> Callable[..., Any]:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def call(reference: str, *args: Any) -> Any:
    """Call the library function ``"module:function"`` names (a declaration's own functions use this to
    reach torch-heavy modules only when a step runs)."""
    return _call(reference)(*args)


def collect(stage: PretrainStage, config: ExperimentConfig, dataset_path: Path) -> dict[str, Any]:
    return _call(stage.collect)(config, dataset_path)


def pretrain(stage: PretrainStage, config: ExperimentConfig, out_dir: Path, dataset_path: Path) -> dict[str, Any]:
    return _call(stage.pretrain)(config, out_dir, dataset_path)


_STAGES: dict[str, PretrainStage] = {}


def register(stage: PretrainStage) -> PretrainStage:
    """Declare ``stage`` (a module of this package does, at import)."""
    return add_once(_STAGES, stage.name, stage, "pretraining stage")


def unregister(name: str) -> None:
    """Forget a stage (a test's or a notebook's declaration); its module stays imported."""
    _STAGES.pop(name, None)


def _discover() -> None:
    # every call: a module added to the package since is picked up; imported ones cost a dict look-up
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def stages() -> dict[str, PretrainStage]:
    """Every declared stage by name, in name order (the order pipelines are built in)."""
    _discover()
    return dict(sorted(_STAGES.items()))


def stage(name: str) -> PretrainStage:
    found = stages().get(name)
    if found is None:
        raise ConfigError(f"pretraining stage {name!r} is not declared; known: {', '.join(stages()) or 'none'}")
    return found


def needed_by(config: ExperimentConfig) -> PretrainStage | None:
    """The pretraining stage ``config`` needs before training, or None.

    A training step takes one pretrained input, so a config that needs two stages is a config error
    (train one stage's artifact first and give its path by that stage's ``override``)."""
    needed = [s for s in stages().values() if s.needed(config)]
    needed = [s for s in needed if not any(s.name in other.replaces for other in needed)]
    if len(needed) > 1:
        names = ", ".join(s.name for s in needed)
        raise ConfigError(
            f"config {config.name} needs pretraining stages {names}; a pipeline trains one before training: "
            f"pretrain the others first and give their results by path ({', '.join(s.override for s in needed)})"
        )
    return needed[0] if needed else None


__all__ = ["PretrainStage", "call", "collect", "needed_by", "pretrain", "register", "stage", "stages", "unregister"]
