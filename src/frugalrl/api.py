"""The Python API: ``frugalrl.load_config``, ``train``, ``load_policy`` and ``evaluate`` (docs/python-api.md).

Each function is the CLI's own path with Python arguments (``config.load_config``, ``training.train``,
``policy_store.load_policy``, ``evaluation.evaluate_policy``); every error a user can fix is a one-line
``FrugalError``. ``frugalrl/__init__.py`` loads this module on first use, so ``import frugalrl`` stays light.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frugalrl.config import MAX_EVAL_EPISODES, EnvConfig, ExperimentConfig, apply_overrides, validate_config
from frugalrl.config import load_config as load_config_file
from frugalrl.envs.factory import env_spaces
from frugalrl.errors import ConfigError, FrugalError
from frugalrl.evaluation import EvalResult, evaluate_policy
from frugalrl.loop import Callback
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.policy_store import env_config, trained_env
from frugalrl.policy_store import load_policy as load_policy_uri
from frugalrl.resume import check_run_schema
from frugalrl.training import train as train_run

RUNS_DIR = Path("runs")  # where train puts a run given no out: runs/NAME, runs/NAME-2, ...
DICT_SOURCE = "config dict"  # how an error names a config given as a dict


@dataclass(frozen=True)
class Run:
    """A finished training run: its directory, ``summary.json`` (the run contract), the MLflow run
    (``None`` with tracking off) and the trained policy, loaded from the directory."""

    run_dir: Path
    summary: dict[str, Any]
    mlflow_run_id: str | None
    policy: ExportedPolicy


def load_config(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> ExperimentConfig:
    """A validated experiment config from a YAML file or a dict, with ``key.sub=value`` overrides (the CLI's
    ``--set``) applied. A bad config raises ``ConfigError`` (a ``FrugalError``) with one line naming the field,
    the bad value and what is allowed; a dict is not changed."""
    if isinstance(source, dict):
        data = apply_overrides(copy.deepcopy(source), list(overrides or []), DICT_SOURCE)
        return validate_config(data, source=DICT_SOURCE)
    if isinstance(source, str | Path):
        return load_config_file(source, list(overrides or []))
    raise ConfigError(f"load_config takes a YAML file's path or a dict, not a {type(source).__name__}")


def train(
    config: ExperimentConfig | str | Path | dict[str, Any],
    out: str | Path | None = None,
    *,
    overrides: list[str] | None = None,
    progress: bool | None = None,
    resume: bool = False,
    callbacks: Sequence[Callback] = (),
) -> Run:
    """Train a policy as ``config`` says (an ``ExperimentConfig``, or what ``load_config`` takes) into the new
    or empty directory ``out`` (default: ``runs/NAME``, ``runs/NAME-2``, ... for the config's name). ``progress``
    forces the progress bar on or off (default: on when stdout is a terminal). ``resume=True`` continues the
    run in ``out`` from its checkpoint (``config``: that run's). ``callbacks`` (``frugalrl.Callback``) see every
    update and may stop training. Trains in this process, so ``distributed.workers`` must be 1
    (``frugalrl train --workers N`` runs several)."""
    if resume and (out is None or overrides):
        raise FrugalError("train(resume=True) continues the run in out: pass out, and no overrides")
    if resume:
        check_run_schema(Path(out))  # a run of another schema: said as such, not as its config.yaml's keys
    if isinstance(config, ExperimentConfig):
        if overrides:
            config = validate_config(apply_overrides(config.to_dict(), list(overrides), "config"), source="config")
    else:
        config = load_config(config, overrides)
    if config.distributed.workers > 1:
        raise FrugalError(
            f"distributed.workers {config.distributed.workers}: frugalrl.train trains in this process; "
            "run several workers with: frugalrl train CONFIG --out DIR --workers N"
        )
    run_dir = Path(out) if out is not None else _new_run_dir(config.name)
    summary = train_run(config, run_dir, resume=resume, interactive=progress, callbacks=callbacks)
    return Run(run_dir, summary, mlflow_run_id=summary.get("mlflow_run_id"), policy=load_policy(run_dir))


def load_policy(ref: str | Path) -> ExportedPolicy:
    """A trained policy from a run directory, its ``policy.pt``, or an MLflow URI (``models:/NAME@ALIAS``,
    ``models:/NAME/VERSION``, ``runs:/RUN_ID/policy``). ``policy.predict(obs)`` acts on NumPy observations;
    calling it (``policy(tensor)``) gives the deterministic actions of a batch tensor, as before. A missing
    file raises ``CheckpointError``, an MLflow model that cannot be fetched ``TrackingError`` (both
    ``FrugalError``)."""
    return load_policy_uri(str(ref))


def evaluate(
    policy: ExportedPolicy | Run | str | Path,
    episodes: int = 20,
    seed: int = 10_000,
    deterministic: bool = True,
    env: str | None = None,
) -> EvalResult:
    """Play ``episodes`` episodes of the env the policy was trained on, or of ``env`` (an id whose observations
    and actions the policy takes; the rest of its env config as trained), episode i from seed ``seed + i``, as
    ``frugalrl evaluate`` does, and summarise their returns: mean, std, IQM and a 95% bootstrap CI.
    ``policy`` is a loaded policy, a ``Run``, or what ``load_policy`` takes."""
    if isinstance(policy, Run):
        policy = policy.policy
    elif isinstance(policy, str | Path):
        policy = load_policy(policy)
    elif not isinstance(policy, ExportedPolicy):
        raise FrugalError(f"evaluate takes a policy, a Run, a run directory or a models:/ URI, not a {type(policy)}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or not 1 <= episodes <= MAX_EVAL_EPISODES:
        raise FrugalError(f"evaluate: episodes {episodes!r} must be a whole number from 1 to {MAX_EVAL_EPISODES:,}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise FrugalError(f"evaluate: seed {seed!r} must be a whole number >= 0")
    device = next(policy.parameters()).device  # evaluated where it is
    return evaluate_policy(policy, evaluation_env(policy, env), episodes, seed, deterministic, device=device)


def evaluation_env(policy: ExportedPolicy, env: str | None = None) -> EnvConfig:
    """The env config ``policy`` was trained on; with ``env``, that id instead, once its spaces fit the policy."""
    trained = trained_env(policy, "the policy")
    if env is None:
        return trained
    other = env_config({**EnvConfig.saved(policy.spec["env"]), "id": env}, "env")  # as trained, but the id
    _same_spaces(trained, other)
    return other


def _same_spaces(trained: EnvConfig, other: EnvConfig) -> None:
    """Refuse an env whose observations or actions a policy trained on ``trained`` cannot take."""
    (obs_a, act_a), (obs_b, act_b) = env_spaces(trained), env_spaces(other)
    if (
        obs_a.shape != obs_b.shape
        or type(act_a) is not type(act_b)
        or act_a.shape != act_b.shape
        or (getattr(act_a, "n", None) != getattr(act_b, "n", None))
    ):
        raise FrugalError(
            f"env {other.id}: observations {obs_b.shape} and actions {act_b} do not fit a policy trained on "
            f"{trained.id} (observations {obs_a.shape}, actions {act_a}); evaluate it on an env with the same spaces"
        )


def _new_run_dir(name: str) -> Path:
    """``runs/NAME``, or the first of ``runs/NAME-2``, ``runs/NAME-3``, ... that does not exist yet."""
    stem = name.replace("/", "-").replace("\\", "-") or "run"
    candidate, number = RUNS_DIR / stem, 1
    while candidate.exists():
        number += 1
        candidate = RUNS_DIR / f"{stem}-{number}"
    return candidate
