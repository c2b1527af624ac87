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
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from frugalrl import pretraining
from frugalrl.config import ExperimentConfig, _describe, _Strict, load_config, read_text_file, yaml_mapping
from frugalrl.credentials import redact_data, redact_text
from frugalrl.envs.registry import is_atari
from frugalrl.errors import ConfigError
from frugalrl.race.contenders import parse_contenders

# The patterns kfp's PipelineTask.set_cpu_*/set_memory_* accept, checked here so that a bad value is a
# one-line error at load time rather than a kfp traceback at compile time.
_CPU = re.compile(r"([0-9]*[.])?[0-9]+m?$")
_MEMORY = re.compile(r"^[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki){0,1}$")


_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}  # fmt: skip


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity in cores: ``2``, ``0.5``, ``500m``."""
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity in bytes: ``6G``, ``512Mi``, ``1000``."""
    number, unit = re.fullmatch(r"([0-9]+)([A-Za-z]*)", quantity).groups()
    return int(number) * _UNITS[unit]


class StageResources(_Strict):
    """What one class of step asks Kubernetes for: requests (what the scheduler reserves), limits (what the
    container may use) and a deadline (``activeDeadlineSeconds``: a hung step fails instead of holding a node)."""

    cpu_request: str = Field(description="Kubernetes CPU quantity: cores (4, 0.5) or millicores (500m)")
    cpu_limit: str
    memory_request: str = Field(description="Kubernetes memory quantity: a number, optionally E/P/T/G/M/K(i)")
    memory_limit: str
    timeout_s: int = Field(ge=60, description="the step's deadline in seconds")

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

    @model_validator(mode="after")
    def _request_within_limit(self) -> StageResources:
        # Kubernetes refuses such a pod when the step starts; here it is a line when the profile loads
        if cpu_cores(self.cpu_request) > cpu_cores(self.cpu_limit):
            raise ValueError(f"cpu_request {self.cpu_request} is above cpu_limit {self.cpu_limit}; raise the limit")
        if memory_bytes(self.memory_request) > memory_bytes(self.memory_limit):
            raise ValueError(
                f"memory_request {self.memory_request} is above memory_limit {self.memory_limit}; raise the limit"
            )
        return self


class GpuResources(StageResources):
    gpu_count: int = Field(1, ge=1, description="nvidia.com/gpu per step")


def _light() -> StageResources:
    return StageResources(cpu_request="500m", cpu_limit="1", memory_request="1G", memory_limit="2G", timeout_s=3600)


def _cpu() -> StageResources:
    return StageResources(cpu_request="2", cpu_limit="2", memory_request="4G", memory_limit="8G", timeout_s=6 * 3600)


def _race() -> StageResources:
    return StageResources(cpu_request="1", cpu_limit="1", memory_request="2G", memory_limit="8G", timeout_s=6 * 3600)


def _gpu() -> GpuResources:
    return GpuResources(cpu_request="4", cpu_limit="8", memory_request="16G", memory_limit="32G", timeout_s=24 * 3600)


class Resources(_Strict):
    """What each class of step asks for, and where GPU steps land.

    ``light``: evaluation, registration, the best trial, the race's decision, the report. ``cpu``: collection,
    and every training, tuning and pretraining step placed on the CPU pool. ``race``: a race's runs on the CPU
    pool (one torch thread each: one core, so each run's CPU-seconds are its own). ``gpu``: the training and
    pretraining steps whose config runs on a GPU (``ProfileStage.pool``). The node selector and toleration are
    the compiled pipeline's defaults for its ``gpu_node_selector`` and ``gpu_toleration`` parameters (a run
    can pass others): the names are the cluster's.
    """

    light: StageResources = Field(default_factory=_light)
    cpu: StageResources = Field(default_factory=_cpu)
    race: StageResources = Field(default_factory=_race)
    gpu: GpuResources = Field(default_factory=_gpu)
    gpu_node_selector: dict[str, str] = Field(
        default_factory=lambda: {"cloud.google.com/gke-nodepool": "gpu-pool"},
        description="the GPU node pool's labels",
    )
    gpu_toleration: dict[str, str] = Field(
        default_factory=lambda: {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        description="lets GPU steps onto the tainted GPU pool",
    )

    @model_validator(mode="before")
    @classmethod
    def _over_the_defaults(cls, data: Any) -> Any:
        """A class written in part (``gpu: {gpu_count: 2}``) keeps its other defaults."""
        if not isinstance(data, dict):
            return data
        defaults = {"light": _light, "cpu": _cpu, "race": _race, "gpu": _gpu}
        return {k: {**defaults[k]().model_dump(), **v} if k in defaults and isinstance(v, dict) else v
                for k, v in data.items()}  # fmt: skip


_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a Kubernetes object name (DNS subdomain)
_NAME_OR_NONE = f"^$|{_NAME}"


class ClusterSettings(_Strict):
    """What a compiled pipeline asks the cluster for besides compute: the Secrets its steps read, the pull secret.

    Steps take ``MLFLOW_TRACKING_URI`` (required; ``MLFLOW_TRACKING_USERNAME``, ``MLFLOW_TRACKING_PASSWORD`` and
    ``MLFLOW_TRACKING_TOKEN`` when present) and, on Optuna steps, ``OPTUNA_STORAGE`` from ``tracking_secret_name``, in
    the namespace the pipeline runs in (``infra/kfp``). The names are the cluster's, so they are settings.
    """

    tracking_secret_name: str = Field("frugalrl-tracking", pattern=_NAME, description="MLflow and Optuna")
    artifact_secret_name: str = Field(
        "", pattern=_NAME_OR_NONE, description="AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, MLFLOW_S3_ENDPOINT_URL "
        "for an artifact store the MLflow server does not proxy; empty: the server proxies artifacts",
    )  # fmt: skip
    image_pull_secret_name: str = Field("", pattern=_NAME_OR_NONE, description="a private registry's pull secret")


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
    pool: Literal["auto", "cpu", "gpu"] = Field(
        "auto", description="where its training and pretraining run: auto (a GPU when the config's device is cuda, "
        "or auto on pixels), cpu or gpu",
    )  # fmt: skip

    @property
    def adapted_name(self) -> str:
        return self.adapted_model_name or f"{self.model_name}-adapted"


class TuneStage(_Strict):
    """Optuna workers (a ParallelFor sharing one study) before the train stage, when its config has ``tuning``."""

    workers: int = Field(0, ge=0, description="0: no tune stage")
    overrides: list[str] = Field(default_factory=list, description="added to the train stage's overrides")


class RaceStage(_Strict):
    """An equal-CPU race on the train stage's config before it is tuned and trained (docs/race.md): contenders x
    seeds as a ParallelFor, then one decision step; the winner's changes are what the tune and train stages add."""

    contenders: list[str] = Field(
        min_length=2, description="the control first: built-ins (plain, random-skip, fewer-epochs, pivot, "
        "prioritized, tiered) or LABEL:KEY=VALUE[;KEY=VALUE] variants of the train stage's config",
    )  # fmt: skip
    seeds: int = Field(5, ge=1, description="paired seeds per contender; with fewer than 5 the race decides nothing")
    cpu_budget_s: float = Field(gt=0, description="CPU-seconds of training per run (its step's process)")
    overrides: list[str] = Field(default_factory=list, description="added to the train stage's for the race's runs")
    parallel: int = Field(0, ge=0, description="runs at a time (the ParallelFor's parallelism); 0: every run at once")


class Stages(_Strict):
    race: RaceStage | None = None
    train: ProfileStage | None = None
    tune: TuneStage = Field(default_factory=TuneStage)
    latent: ProfileStage | None = None
    peft: ProfileStage | None = None


class Profile(_Strict):
    """A production profile; ``load_profile`` builds one and checks its stages' configs."""

    name: str = Field(min_length=1, description="the pipeline is frugalrl-production-<name>")
    resources: Resources = Field(default_factory=Resources)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
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

    @property
    def race(self) -> RaceStage | None:
        return self.stages.race

    def race_plan(self) -> dict[str, Any]:
        """What the race stage runs and its decision step reads: the train stage's config (path and redacted
        text), the contenders with their changes, the --set every run gets, the budget and the seeds."""
        assert self.race is not None and self.train is not None
        sets = [*self.train.overrides, *self.race.overrides]
        contenders = parse_contenders(self.race.contenders, self._root / self.train.config, sets)
        needs = []  # (contender, the pretraining stage its config needs, that config's hash)
        for contender in contenders:
            config = load_config(self._root / self.train.config, [*sets, *contender.overrides])
            stage = pretraining.needed_by(config)
            needs += [(contender, stage.name, config.hash())] if stage else []
        # the race builds one, from the first contender that needs it (_check_race refuses contenders that
        # would need two: two stages, or one stage from two configs)
        pretrain = {"stage": needs[0][1], "sets": [*sets, *needs[0][0].overrides]} if needs else {}
        return {"config": self.train.config, "config_yaml": self.stage_text(self.train), "sets": sets,
                "contenders": [{**c.as_dict(), "config": self.train.config} for c in contenders],
                "cpu_budget_s": self.race.cpu_budget_s, "seeds": list(range(1, self.race.seeds + 1)),
                "pretrain": pretrain, "stages_needed": sorted({name for _, name, _ in needs}),
                "pretraining_by": {c.name: f"{name} {digest[:8]}" for c, name, digest in needs}}  # fmt: skip

    def stage_config(self, stage: ProfileStage) -> ExperimentConfig:
        """The stage's experiment config with its overrides, validated."""
        return load_config(self._root / stage.config, stage.overrides)

    def pool(self, stage: ProfileStage) -> Literal["cpu", "gpu"]:
        """Where ``stage``'s training and pretraining run (collection, evaluation and registration are CPU work).

        ``auto`` follows the config: a GPU for ``device: cuda``, and for ``device: auto`` on pixels (a CNN, an
        encoder, a world model gain from one; an MLP on a state vector does not: its step waits on the env)."""
        if stage.pool != "auto":
            return stage.pool
        config = self.stage_config(stage)
        if config.device == "cuda" or (config.device == "auto" and is_atari(config.env.id)):
            return "gpu"
        return "cpu"

    def gpu_stages(self) -> list[ProfileStage]:
        return [s for s in (self.train, self.latent, self.peft) if s is not None and self.pool(s) == "gpu"]

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
        _check_pool(path.name, key, stage, config.device)
        if not (config.tracking.enabled and config.tracking.log_model):  # the registry is where stages meet
            raise ConfigError(
                f"profile {path.name}: stage {key} registers {stage.model_name!r} but {stage.config} logs no "
                "MLflow model; add tracking.enabled=true to the stage's overrides"
            )
    if profile.race is not None:
        _check_race(path.name, profile)
    if profile.tune.workers and profile.train is not None:  # the tune workers' own --set, checked here too
        try:
            load_config(root / profile.train.config, [*profile.train.overrides, *profile.tune.overrides])
        except ConfigError as exc:
            raise ConfigError(f"profile {path.name}: stage tune: {exc}") from None
    return profile


def _check_race(source: str, profile: Profile) -> None:
    """A race stage races variants of the train stage's config, every contender fitting its learner and
    needing one pretraining stage at most (the race builds it once): refused here, in one line, otherwise."""
    if profile.train is None:
        raise ConfigError(f"profile {source}: stage race races the train stage's config, and the profile has no "
                          "train stage; add one")  # fmt: skip
    files = [spec for spec in profile.race.contenders if "=" in spec.split(":", 1)[0]]
    if files:
        raise ConfigError(f"profile {source}: stage race: contender {files[0]} names another config file; in a "
                          "profile the contenders are built-ins or LABEL:KEY=VALUE variants of the train stage's "
                          "config (race other files with frugalrl race)")  # fmt: skip
    try:
        plan = profile.race_plan()
    except ConfigError as exc:
        raise ConfigError(f"profile {source}: stage race: {exc}") from None
    if len(set(plan["pretraining_by"].values())) > 1:
        needed = ", ".join(f"{name} ({what})" for name, what in plan["pretraining_by"].items())
        raise ConfigError(f"profile {source}: stage race: its contenders need different pretraining ({needed}); "
                          "a race stage builds one: race them with frugalrl race (one per config)")  # fmt: skip


def _check_pool(source: str, key: str, stage: ProfileStage, device: str) -> None:
    """A pool the config's device cannot use is refused: a GPU held by a CPU run, or a CUDA run on a CPU node."""
    if stage.pool == "gpu" and device == "cpu":
        raise ConfigError(
            f"profile {source}: stage {key} asks for a GPU (pool: gpu) but {stage.config} runs on device cpu, so the "
            "GPU would be held and never used; add device=auto to the stage's overrides, or drop pool"
        )
    if stage.pool == "cpu" and device == "cuda":
        raise ConfigError(
            f"profile {source}: stage {key} runs on the CPU pool (pool: cpu) but {stage.config} asks for device "
            "cuda, which a CPU node does not have; add device=auto (or device=cpu) to the stage's overrides"
        )
