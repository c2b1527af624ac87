"""The pretrained policy a PEFT comparison starts from: a SAC run's actor, critics and temperature.

Fine-tuning needs more than the exported policy: starting the critics from scratch would
first unlearn the policy. So the source is a SAC *run*: its ``checkpoint.pt`` (learner state)
and ``config.yaml``, from a run directory or from the MLflow run behind a registered model
(``models:/halfcheetah-policy@champion``: the run's ``run/`` artifacts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from frugalrl.algos.sac import build_sac_actor
from frugalrl.checkpoint import load_checkpoint
from frugalrl.config import ExperimentConfig, load_config
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError, TrackingError
from frugalrl.files import read_json_object
from frugalrl.tracking.artifacts import resolve_artifact
from frugalrl.tracking.registry import registry_client


class SourceMissing(TrackingError):
    """The registry answers, and has no such model (the comparison may train one)."""


@dataclass
class SourceRun:
    """A finished SAC run: its config and the learner state of its last checkpoint."""

    config: ExperimentConfig
    agent_state: dict[str, Any]
    where: str
    eval_mean: float | None = None
    train_flops: float | None = None  # what training the source from scratch cost
    train_s: float | None = None  # its wall-clock, the evaluation left out

    def actor(self) -> torch.nn.Module:
        """The source policy's actor, rebuilt from the checkpoint (no policy.pt needed)."""
        env = make_vec_env(self.config.env.model_copy(update={"num_envs": 1}), training=False)
        actor = build_sac_actor(env.single_observation_space, env.single_action_space, self.config)
        env.close()
        actor.load_state_dict(self.agent_state["policy"])
        return actor.eval()


def run_directory(uri: str) -> Path:
    """A local directory holding a run's files (config.yaml, checkpoint.pt, policy.pt): the path itself,
    or the ``run/`` artifacts of the MLflow run behind ``models:/NAME@ALIAS``, ``models:/NAME/VERSION``
    or ``runs:/RUN_ID``."""
    if not uri.startswith(("models:/", "runs:/")):
        return resolve_artifact(uri, None, "peft.source", "pass a frugalrl SAC run directory")
    client = registry_client()  # an unreachable server fails here, with its own message
    try:
        if uri.startswith("models:/"):
            name_ref = uri.removeprefix("models:/")
            if "@" in name_ref:
                name, alias = name_ref.split("@", 1)
                run_id = client.get_model_version_by_alias(name, alias).run_id
            else:
                name, version = name_ref.rsplit("/", 1)
                run_id = client.get_model_version(name, version).run_id
        else:
            run_id = uri.removeprefix("runs:/").split("/")[0]
    except Exception as exc:
        raise SourceMissing(f"{uri} is not in the MLflow registry ({str(exc).splitlines()[0][:120]})") from None
    return resolve_artifact(
        f"runs:/{run_id}/run", None, "source run", "pass the run directory as peft.source",
        fetch_error=lambda reason: f"cannot fetch the source run behind {uri} ({reason[:160]}); check the name and "
        "alias, or pass the run directory as peft.source",
    )  # fmt: skip


def load_source(uri: str) -> SourceRun:
    """Load a SAC source run from a directory or an MLflow model/run URI."""
    directory = run_directory(uri)
    if not (directory / "config.yaml").is_file():
        raise ConfigError(f"peft.source {uri}: no config.yaml in {directory}; pass a frugalrl SAC run directory")
    config = load_config(directory / "config.yaml")
    if config.algo != "sac":
        raise ConfigError(f"peft.source {uri} is a {config.algo} run; the PEFT comparison fine-tunes SAC runs")
    checkpoint = load_checkpoint(directory / "checkpoint.pt")
    summary = {}
    if (directory / "summary.json").is_file():
        summary = read_json_object(
            directory / "summary.json", "peft.source's", "point peft.source at a SAC run directory"
        )
    train_flops = summary.get("train_flops")
    if train_flops is None and "meter" in checkpoint:  # a run stopped early: its checkpoint's meter knows
        meter = CostMeter()
        meter.load_state_dict(checkpoint["meter"])
        train_flops = meter.train_flops
    train_s = summary["wall_s"] - summary.get("eval_s", 0.0) if "wall_s" in summary else None
    return SourceRun(config, checkpoint["agent"], str(uri), summary.get("eval_mean"), train_flops, train_s)
