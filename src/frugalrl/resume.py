"""A run's checkpoint: what it holds, when a resume may use it, and how a learner continues from it.

``checkpoint_state`` is what ``Checkpointer`` writes to ``checkpoint.pt``; ``check_resumable`` refuses a
checkpoint that cannot continue this run before anything in the run directory is rewritten (one written in
another config schema first: ``check_run_schema`` says so of a run directory before its config.yaml is read);
``restore`` puts the learner, the meter, the env and torch's RNG back where the checkpoint left them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from frugalrl import __version__
from frugalrl.algos.base import Learner, Snapshottable
from frugalrl.checkpoint import CHECKPOINT_FILE, pack_bytes, unpack_bytes
from frugalrl.config import (
    SCHEMA_VERSION,
    SCHEMA_ZERO,
    ExperimentConfig,
    read_text_file,
    schema_zero_problem,
    yaml_mapping,
)
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
        "schema_version": config.schema_version,
        "config_hash": config.hash(),
        "agent": agent.state_dict(),
        "meter": meter.state_dict(),
        "env_wrappers": env_state_dict(agent.env),
        "env_snapshot": pack_bytes(snapshot),
        "torch_rng": torch.get_rng_state(),
        "mlflow_run_id": run_id,
        "run_dir": str(Path(out).resolve()),  # a copied directory resumes into an MLflow run of its own
    }


def written_in_another_schema(what: str, version: Any) -> str | None:
    """The one line refusing to resume ``what``, written in config schema ``version``; None for today's."""
    if version == SCHEMA_VERSION:
        return None
    newer = isinstance(version, int) and version > SCHEMA_VERSION
    return (
        f"{what} was written by {'a newer' if newer else 'an older'} frugalrl (schema {version}); it cannot be "
        "resumed by this version: retrain, or resume with the frugalrl version that wrote it"
    )


def check_run_schema(run_dir: Path) -> None:
    """A run directory whose config.yaml is in another schema is refused as a run, not as a config file (whose
    error would say what to rewrite, and a rewritten config.yaml would still not resume its checkpoint). A
    config.yaml of today's keys without ``schema_version`` passes: its checkpoint says which schema wrote it."""
    config_file = Path(run_dir) / "config.yaml"
    if not config_file.is_file():
        return  # loading it names what is missing
    data = yaml_mapping(read_text_file(config_file, "config file", str(config_file)), str(config_file))
    stated = data.get("schema_version")
    if stated is None and schema_zero_problem(data) is None:
        return
    if line := written_in_another_schema(f"run {run_dir}", SCHEMA_ZERO if stated is None else stated):
        raise CheckpointError(line)


def check_resumable(checkpoint: dict[str, Any], config: ExperimentConfig, out: Path) -> None:
    """A resume that cannot continue this run is refused before anything in it is rewritten."""
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint format {checkpoint.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    # a checkpoint of before versioning holds no schema_version: its config_hash is of another hash, too
    schema = checkpoint.get("schema_version", SCHEMA_ZERO)
    if line := written_in_another_schema(f"checkpoint {out / CHECKPOINT_FILE}", schema):
        raise CheckpointError(line)
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
