"""``ExperimentConfig``, the root of every experiment file: its schema version, its sections, the checks across
them, its hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from frugalrl.config._base import _registered_env, _Strict
from frugalrl.config.algos import DQNConfig, PPOConfig, SACConfig
from frugalrl.config.env import EnvConfig
from frugalrl.config.latent import LatentConfig
from frugalrl.config.peft import PeftConfig
from frugalrl.config.policy import PolicyConfig
from frugalrl.config.runtime import CheckpointConfig, DistributedConfig, EvalConfig, PromotionConfig, TrackingConfig
from frugalrl.config.schema import SCHEMA_VERSION, other_schema_problem, schema_zero_problem
from frugalrl.config.techniques import (
    MetaConfig,
    PivotConfig,
    ReplayConfig,
    RolloutConfig,
    ScoreStagesConfig,
    SelectionConfig,
)
from frugalrl.config.tuning import TuningConfig

LATENT_SOURCE = "latent"  # the rollout source of the latent curriculum
_ALGO_SECTIONS: dict[str, type[BaseModel]] = {"ppo": PPOConfig, "dqn": DQNConfig, "sac": SACConfig}


class ExperimentConfig(_Strict):
    """The root of every experiment file. ``plugins`` comes before the sections: its modules register their kinds
    before the sections naming them are checked."""

    schema_version: int = Field(
        SCHEMA_VERSION,
        description=f"the layout the config is written in; this frugalrl reads schema {SCHEMA_VERSION} only (a file "
        "may leave it out). Every dump states it: a run's config.yaml, its policy files and checkpoints",
    )
    plugins: list[str] = Field(
        default_factory=list,
        description="modules imported before the rest is checked, where your own techniques register their kinds "
        "(installed or on PYTHONPATH); docs/python-api.md",
    )
    name: str = Field("experiment", description="the run's name: MLflow's run name, the default study name")
    seed: int = Field(1, ge=0, description="seeds the envs, the networks and every random draw; change it for a repeat")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "cpu", description="where the networks run; auto = cuda when a GPU is visible, else cpu"
    )
    threads: int = Field(1, ge=0, description="torch CPU threads; 0 keeps torch's default")
    algo: Literal["ppo", "dqn", "sac"] = Field(
        "ppo", description="the learning algorithm; its section (ppo, dqn or sac) holds its hyperparameters"
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="which environment, how many copies, its wrappers")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="the network's shape and initialisation")
    ppo: PPOConfig = Field(default_factory=PPOConfig, description="PPO's hyperparameters (algo: ppo)")
    dqn: DQNConfig = Field(default_factory=DQNConfig, description="Double DQN's hyperparameters (algo: dqn)")
    sac: SACConfig = Field(default_factory=SACConfig, description="Soft Actor-Critic's hyperparameters (algo: sac)")
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig,
        description="where the learner's experience comes from: the real env (real) or the latent curriculum (latent)",
    )
    replay: ReplayConfig = Field(
        default_factory=ReplayConfig, description="DQN's and SAC's replay store: its kind, size and settings"
    )
    meta: MetaConfig = Field(
        default_factory=MetaConfig,
        description="DQN's and SAC's hyper controller: fixed values, or RMT's meta-controller",
    )
    score_stages: ScoreStagesConfig = Field(
        default_factory=ScoreStagesConfig, description="DQN and SAC: new learning rate and gamma at return thresholds"
    )
    selection: SelectionConfig = Field(
        default_factory=SelectionConfig, description="PPO: which samples of each rollout get a backward pass"
    )
    latent: LatentConfig = Field(
        default_factory=LatentConfig, description="the latent curriculum (rollout.kind latent): encoder, world model"
    )
    peft: PeftConfig | None = Field(None, description="the PEFT comparison (`frugalrl peft compare`)")
    total_real_steps: int | None = Field(
        None, ge=1, description="real env-step budget; when set it is the value of ppo.total_timesteps"
    )
    cpu_budget_s: float | None = Field(
        None,
        gt=0,
        description="stop training once the run's process has used this many CPU-seconds (every thread, set-up "
        "included; evaluation is not): comparisons at equal compute. The step budget still applies",
    )
    eval: EvalConfig = Field(
        default_factory=EvalConfig, description="the final evaluation and the evaluations during training"
    )
    checkpoint: CheckpointConfig = Field(
        default_factory=CheckpointConfig, description="how often the run's checkpoint (for --resume) is written"
    )
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig, description="MLflow logging: on or off, the experiment, the server's timeouts"
    )
    promotion: PromotionConfig = Field(
        default_factory=PromotionConfig, description="the statistical gate a new policy passes to become champion"
    )
    distributed: DistributedConfig = Field(
        default_factory=DistributedConfig, description="multi-worker training: workers and their gradient reducer"
    )
    tuning: TuningConfig | None = Field(
        None, description="Optuna search (`frugalrl tune`): its space and study; null = no search"
    )
    log_every_updates: int = Field(
        10, ge=1, description="off a terminal, a progress line every this many updates (a terminal gets a bar)"
    )

    @field_validator("plugins")
    @classmethod
    def _import_plugins(cls, value: list[str]) -> list[str]:
        _registered_env(None, value)  # imports the modules alone (a one-line error naming one that fails)
        return value

    @field_validator("schema_version")
    @classmethod
    def _todays_schema(cls, version: int) -> int:
        if problem := other_schema_problem(version):
            raise ValueError(problem)
        return version

    @model_validator(mode="before")
    @classmethod
    def _no_schema_zero_keys(cls, data: Any) -> Any:
        """A key of the layout before versioning (``replay.alpha``) is refused by name, with the key to write:
        as an unknown key it would only list today's keys."""
        if isinstance(data, dict) and (problem := schema_zero_problem(data)):
            raise ValueError(problem)
        return data

    @property
    def pivot(self) -> PivotConfig:
        """PivotRL's settings: ``selection.settings`` when ``selection.kind`` is pivot, else the defaults
        (what the evaluator's pretraining reads)."""
        return PivotConfig.model_validate(self.selection.settings if self.selection.kind == "pivot" else {})

    @property
    def latent_curriculum(self) -> bool:
        """Whether the latent curriculum is the rollout source (``rollout.kind: latent``)."""
        return self.rollout.kind == LATENT_SOURCE

    @property
    def algo_config(self) -> PPOConfig | DQNConfig | SACConfig:
        """The hyperparameter section of the chosen algorithm."""
        return {"dqn": self.dqn, "sac": self.sac}.get(self.algo, self.ppo)

    @model_validator(mode="after")
    def _real_step_budget(self) -> ExperimentConfig:
        budget, section = self.total_real_steps, self.algo_config
        if budget is not None and budget != section.total_timesteps:
            if "total_timesteps" in section.model_fields_set:
                raise ValueError(
                    f"total_real_steps {budget} and {self.algo}.total_timesteps {section.total_timesteps} "
                    "disagree; set only one of them"
                )
            section.total_timesteps = budget
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_ignored_algo_section(cls, data: Any) -> Any:
        """A section of an algorithm the run does not use, with settings in it, would be ignored silently."""
        if not isinstance(data, dict):
            return data
        algo = data.get("algo", "ppo")
        # A whole config written back (a run's config.yaml) holds every algorithm's section at its
        # defaults, so there only a changed value counts; in a file a person wrote, any key does.
        dumped = all(isinstance(data.get(name), dict) for name in _ALGO_SECTIONS)
        for other, model in _ALGO_SECTIONS.items():
            section = data.get(other)
            if other == algo or not isinstance(section, dict) or not section:
                continue
            ignored = sorted(section)
            if dumped:
                try:  # compared as validated values ("1e-05" from a JSON dump is YAML text for 1e-5)
                    given = model.model_validate(section).model_dump()
                except ValidationError:
                    continue  # the section's own validation names the problem
                defaults = model().model_dump()
                ignored = [k for k in ignored if given[k] != defaults[k]]
            if ignored:
                raise ValueError(
                    f"{other}: settings {ignored} are ignored by algo {algo!r}; remove the {other} "
                    f"section or set algo: {other}"
                )
        return data

    @model_validator(mode="after")
    def _peft_widths_fit_the_network(self) -> ExperimentConfig:
        """A rank or bottleneck wider than the narrowest hidden layer fits no layer that has it as its output;
        refused here, not after the source policy has trained (the input layer's width is checked when a
        method is applied, once the env is made)."""
        if self.peft is None:
            return self
        from frugalrl.peft import methods  # why here: it loads torch, which a plain config does not need

        narrowest = min(self.policy.hidden)
        for name, options in self.peft.methods.items():
            resolved = methods.resolve_options(name, options)
            for key in methods.method(name).width_options:  # not VeRA's rank: its shared pair may be wider than a layer
                if resolved.get(key, 0) > narrowest:
                    raise ValueError(
                        f"peft.methods.{name}.{key} {resolved[key]} is wider than the network's narrowest layer "
                        f"(policy.hidden {self.policy.hidden}); use at most {narrowest}"
                    )
        return self

    @model_validator(mode="after")
    def _cpu_budget_on_one_worker(self) -> ExperimentConfig:
        if self.cpu_budget_s is not None and self.distributed.workers > 1:
            # each worker would stop at its own update while the others wait for its gradients
            raise ValueError(
                "cpu_budget_s ends one process's training; with distributed.workers > 1 the workers would stop "
                "apart: drop cpu_budget_s or train on one worker"
            )
        return self

    @model_validator(mode="after")
    def _latent_runs_alone(self) -> ExperimentConfig:
        if self.algo != "ppo" and (self.latent_curriculum or self.selection.kind != "all"):
            raise ValueError(
                f"algo {self.algo}: the latent curriculum and sample selection work with PPO only; "
                "set algo: ppo or turn them off"
            )
        if self.latent_curriculum and self.selection.kind != "all":
            raise ValueError(
                f"rollout.kind latent with selection.kind {self.selection.kind}: the latent curriculum does not "
                "combine with sample selection yet; set selection.kind: all"
            )
        return self

    @model_validator(mode="after")
    def _distributed_supported(self) -> ExperimentConfig:
        if self.distributed.workers > 1:
            if self.latent_curriculum or self.selection.kind != "all":
                raise ValueError(
                    "distributed.workers > 1: the latent curriculum and sample selection do not run on several "
                    "workers yet; set distributed.workers: 1 or turn them off"
                )
            if self.algo == "ppo" and self.ppo.target_kl is not None:
                raise ValueError(
                    "distributed.workers > 1 with ppo.target_kl: workers would stop their epochs at different "
                    "minibatches and wait for each other forever; set ppo.target_kl: null"
                )
        return self

    @model_validator(mode="after")
    def _batch_fits_rollout(self) -> ExperimentConfig:
        rollout = self.env.num_envs * self.ppo.num_steps
        if self.algo == "ppo" and self.ppo.batch_size > rollout:
            raise ValueError(
                f"ppo.batch_size {self.ppo.batch_size} exceeds the rollout size "
                f"env.num_envs * ppo.num_steps = {rollout}; allowed: <= {rollout}"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def hash(self) -> str:
        """Content hash of the resolved config: sha256 of its dump with sorted keys (so stable across key order)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
