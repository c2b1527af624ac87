"""Typed experiment configs: YAML in, validated pydantic models out, one-line errors.

A config file is the whole description of a run. ``load_config`` reads it, applies
``--set key.sub=value`` overrides, and validates it; anything wrong raises ``ConfigError``
with one line naming the file, the field path, the bad value and what is allowed.

Every name is importable from here; the modules of this package hold one idea each (sections
by topic, ``experiment`` the root with its hash, ``schema`` its version and the keys of before it, ``overrides``,
``errors``, ``loading``, ``explain``).
"""

from __future__ import annotations

# frugalrl.ops.profiles types its own file with these two (strict models, one-line errors)
from frugalrl.config._base import _Strict as _Strict
from frugalrl.config.algos import DQNConfig, PPOConfig, SACConfig
from frugalrl.config.env import AtariConfig, DynamicsConfig, EnvConfig
from frugalrl.config.errors import _describe as _describe
from frugalrl.config.experiment import ExperimentConfig
from frugalrl.config.explain import explain, kind_choices
from frugalrl.config.latent import CurriculumConfig, LatentConfig, StageConfig, WorldModelConfig
from frugalrl.config.loading import config_from_yaml_text, load_config, read_text_file, validate_config, yaml_mapping
from frugalrl.config.overrides import apply_overrides, flatten
from frugalrl.config.peft import PeftConfig, PeftTarget
from frugalrl.config.policy import AdapterSpec, PolicyConfig
from frugalrl.config.runtime import (
    MAX_EVAL_EPISODES,
    CheckpointConfig,
    DistributedConfig,
    EvalConfig,
    PromotionConfig,
    TrackingConfig,
)
from frugalrl.config.schema import SCHEMA_VERSION, SCHEMA_ZERO, policy_view_of_schema_zero, schema_zero_problem
from frugalrl.config.techniques import (
    EvaluatorConfig,
    MetaConfig,
    PivotConfig,
    ReplayConfig,
    ScoreStage,
    ScoreStagesConfig,
    SelectionConfig,
)
from frugalrl.config.tuning import SearchDimension, TuningConfig
from frugalrl.errors import ConfigError

__all__ = [
    "MAX_EVAL_EPISODES",
    "SCHEMA_VERSION",
    "SCHEMA_ZERO",
    "AdapterSpec",
    "AtariConfig",
    "CheckpointConfig",
    "ConfigError",
    "CurriculumConfig",
    "DQNConfig",
    "DistributedConfig",
    "DynamicsConfig",
    "EnvConfig",
    "EvalConfig",
    "EvaluatorConfig",
    "ExperimentConfig",
    "LatentConfig",
    "MetaConfig",
    "PPOConfig",
    "PeftConfig",
    "PeftTarget",
    "PivotConfig",
    "PolicyConfig",
    "PromotionConfig",
    "ReplayConfig",
    "SACConfig",
    "ScoreStage",
    "ScoreStagesConfig",
    "SearchDimension",
    "SelectionConfig",
    "StageConfig",
    "TrackingConfig",
    "TuningConfig",
    "WorldModelConfig",
    "apply_overrides",
    "config_from_yaml_text",
    "explain",
    "flatten",
    "kind_choices",
    "load_config",
    "policy_view_of_schema_zero",
    "read_text_file",
    "schema_zero_problem",
    "validate_config",
    "yaml_mapping",
]
