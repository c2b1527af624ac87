"""Where policies live: a run directory's ``policy.pt`` or an MLflow model URI.

``load_policy`` accepts a run directory, a ``policy.pt`` file, ``models:/name@alias``,
``models:/name/version`` or ``runs:/RUN_ID/policy`` and returns an ``ExportedPolicy``; of a run
directory, the policy it registers (``registered_policy_file``: ``best_policy.pt`` with
``eval.policy: best``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
import yaml
from pydantic import ValidationError

from frugalrl.checkpoint import atomic_write_bytes, load_artifact
from frugalrl.config import EnvConfig, ExperimentConfig, _describe, policy_view_of_schema_zero, validate_config
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError, TrackingError
from frugalrl.nets.builders import build_policy
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.tracking.artifacts import resolve_artifact
from frugalrl.tracking.models import FRUGALRL_POLICY

POLICY_FORMAT = "frugalrl-policy-1"
BEST_POLICY_FILE = "best_policy.pt"  # the best evaluation during training (``eval.every_steps``), as policy.pt


def registered_policy_file(run_dir: Path) -> Path:
    """The policy file of a run directory that its evaluate-and-register stage and ``frugalrl evaluate`` use:
    ``best_policy.pt`` when the run's config.yaml says ``eval.policy: best`` and the file exists, else
    ``policy.pt``. A path that is not a run directory comes back as it is."""
    run_dir = Path(run_dir)
    best, config_file = run_dir / BEST_POLICY_FILE, run_dir / "config.yaml"
    if run_dir.is_dir() and best.is_file() and config_file.is_file():
        data = yaml.safe_load(config_file.read_text())
        section = data.get("eval") if isinstance(data, dict) else None
        if isinstance(section, dict) and section.get("policy") == "best":
            return best
    return run_dir


def save_policy(path: Path, policy: ExportedPolicy, config: ExperimentConfig) -> None:
    """``policy.pt``: weights and the config that rebuilds the network (weights_only-loadable)."""
    buffer = io.BytesIO()
    torch.save({"format": POLICY_FORMAT, "config": config.to_dict(), "state_dict": policy.state_dict()}, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def saved_config(data: dict[str, Any], source: str) -> ExperimentConfig:
    """The config a policy file was saved with. One written before configs were versioned (no
    ``schema_version``) is read without its schema 0 keys, none of which shapes the network
    (``policy_view_of_schema_zero``): a registered model or policy file of then still evaluates and serves."""
    if "schema_version" not in data:
        data = policy_view_of_schema_zero(data)
    return validate_config(data, source=source)


def load_policy_file(path: Path) -> tuple[ExportedPolicy, ExperimentConfig]:
    """Rebuild an ``ExportedPolicy`` from ``policy.pt`` (or a run directory holding one)."""
    blob = load_artifact(path, "policy.pt", POLICY_FORMAT, "policy file", "pass a run directory or its policy.pt")
    path = blob["path"]
    config = saved_config(blob["config"], str(path))
    env = make_vec_env(config.env, num_envs=1, training=False)
    obs_space, act_space = env.single_observation_space, env.single_action_space
    env.close()
    state = blob["state_dict"]
    has_norm = state["obs_mean"].numel() > 0
    parts = build_policy(config, obs_space, act_space)  # latent encoder, network, adapter: as config says
    policy = ExportedPolicy(
        parts.network,
        spec={"env": config.env.model_dump(mode="json"), "policy": config.policy.model_dump(mode="json")},
        obs_mean=state["obs_mean"] if has_norm else None,
        obs_var=state["obs_var"] if has_norm else None,
        clip_obs=config.env.clip_obs,
        encoder=parts.encoder,
    )
    policy.load_state_dict(state)
    return policy.set_spaces(obs_space, act_space).eval(), config


def load_policy(uri: str) -> ExportedPolicy:
    """Load a policy from a path or an MLflow URI (``models:/...``, ``runs:/...``)."""
    if uri.startswith(("models:/", "runs:/", "m-")):  # m-...: a logged model's id, which MLflow resolves

        def failed(reason: str) -> str:
            return f"cannot load model {uri} from MLflow ({reason[:160]}); check the name and alias with the MLflow UI"

        local = resolve_artifact(uri, None, "model", "check the name and alias with the MLflow UI", fetch_error=failed)
        policy_file = Path(local) / "artifacts" / f"{FRUGALRL_POLICY}.pt"  # where log_policy_model put it
        if not policy_file.is_file():
            raise TrackingError(f"model {uri} is not a frugalrl policy (it has no artifact {FRUGALRL_POLICY})")
        return load_policy_file(policy_file)[0]
    return load_policy_file(registered_policy_file(Path(uri)))[0]


def trained_env(policy: ExportedPolicy, source: str) -> EnvConfig:
    """The env config ``policy`` was trained on (its ``spec``), as it validates today; else a one-line
    ``ConfigError`` naming ``source``."""
    return env_config(EnvConfig.saved(policy.spec["env"]), f"{source}: env")


def env_config(data: dict, source: str) -> EnvConfig:
    """``data`` validated as an env section alone; else a one-line ``ConfigError`` naming ``source``."""
    try:
        return EnvConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        raise ConfigError(_describe(errors[0], source, len(errors) - 1, EnvConfig)) from None
