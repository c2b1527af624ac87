"""A run's checkpoint: what it holds, when a resume may use it, and how a learner continues from it.

``checkpoint_state`` is what ``Checkpointer`` writes to ``checkpoint.pt``; ``check_resumable`` refuses a
checkpoint that cannot continue this run before anything in the run directory is rewritten;
``restore`` puts the learner, the meter, the env and torch's RNG back where the checkpoint left them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from frugalrl import __version__
from frugalrl.algos.base import Learner, Snapshottable
from frugalrl.checkpoint import pack_bytes, unpack_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.wrappers import env_state_dict, load_env_state_dict, wrapper_chain
from frugalrl.errors import CheckpointError, FrugalError

CHECKPOINT_FORMAT = "frugalrl-checkpoint-1"


def _base_env(env: Any) -> Any:
    return wrapper_chain(env)[-1]


def checkpoint_state(
    agent: Learner, meter: CostMeter, config: ExperimentConfig, run_id: str | None, out: Path
) -> dict[str, Any]:
    """Everything a resume needs to continue exactly here."""
    base = _base_env(agent.env)
    snapshot = base.snapshot() if isinstance(base, Snapshottable) else None
    return {
        "format": CHECKPOINT_FORMAT,
        "frugalrl_version": __version__,
        "config_hash": config.hash(),
        "agent": agent.state_dict(),
        "meter": meter.state_dict(),
        "env_wrappers": env_state_dict(agent.env),
        "env_snapshot": pack_bytes(snapshot),
        "torch_rng": torch.get_rng_state(),
        "mlflow_run_id": run_id,
        "run_dir": str(Path(out).resolve()),  # a copied directory resumes into an MLflow run of its own
    }


def check_resumable(checkpoint: dict[str, Any], config: ExperimentConfig, out: Path) -> None:
    """A resume that cannot continue this run is refused before anything in it is rewritten."""
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint format {checkpoint.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    if checkpoint["config_hash"] != config.hash():
        raise CheckpointError(
            "checkpoint was written by a different config (hash "
            f"{checkpoint['config_hash']} != {config.hash()}); resume with the run's own config.yaml"
        )
    if (out / "summary.json").exists():
        raise FrugalError(
            f"{out} is a finished run (it has summary.json): nothing to resume; start a new run with --out"
        )


def restore(checkpoint: dict[str, Any], agent: Learner, meter: CostMeter, config: ExperimentConfig) -> None:
    """Learner, meter, env and torch's RNG as the checkpoint left them."""
    agent.load_state_dict(checkpoint["agent"])
    meter.load_state_dict(checkpoint["meter"])
    snapshot = unpack_bytes(checkpoint.get("env_snapshot"))
    base = _base_env(agent.env)
    if snapshot is not None and isinstance(base, Snapshottable):
        base.restore(snapshot)
    else:
        # No physics snapshot (e.g. ALE, Box2D): start fresh episodes, seeded by position.
        print("note: this env cannot be snapshotted; resumed episodes restart, so the run is not bit-identical")
        agent.start(config.seed + agent.update)
    load_env_state_dict(agent.env, checkpoint["env_wrappers"])
    torch.set_rng_state(checkpoint["torch_rng"])


def interrupted_message(agent: Learner, saved: int | None, ckpt_path: Path, out: Path) -> str:
    """The Ctrl-C line: what is kept and how to go on."""
    if not agent.resumable:
        return f"interrupted at update {agent.update}; this kind of run cannot be resumed: start it again"
    if saved is None and not ckpt_path.exists():
        return f"interrupted at update {agent.update} before the first checkpoint; start again with a new --out"
    kept = f"update {saved}" if saved is not None else "an earlier update"
    return (f"interrupted at update {agent.update}; the checkpoint of {kept} is kept at {ckpt_path}; "
            f"continue with: frugalrl train --resume {out}")  # fmt: skip
