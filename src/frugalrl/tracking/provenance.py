"""Provenance: the tags that tie a run to its code, packages, image, pretrained inputs and pipeline run."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frugalrl import __version__
from frugalrl.config import ExperimentConfig
from frugalrl.errors import TrackingError
from frugalrl.files import read_json_object
from frugalrl.tracking.store import registry_client

# How a container step receives its pipeline run id from outside (the PyTorchJob pods set it);
# in-process callers pass ``pipeline_run_id`` explicitly instead.
PIPELINE_RUN_ENV = "FRUGALRL_PIPELINE_RUN_ID"
AUDITED_PACKAGES = ("torch", "numpy", "gymnasium", "ale-py", "mujoco", "mlflow", "optuna", "peft", "kfp")
# The step image a pipeline step runs in: its digest and reference, set on every step by the compiled
# pipeline (``frugalrl.pipelines.containers.pinned_image``); absent on a host.
IMAGE_DIGEST_ENV = "FRUGALRL_IMAGE_DIGEST"
IMAGE_REF_ENV = "FRUGALRL_IMAGE_REF"
IMAGE_WITH_ENV = "FRUGALRL_IMAGE_WITH"  # set in an image built with --with (ops/image_with.py)


def git_commit(path: Path | None = None) -> str:
    """The commit of the frugalrl checkout, or ``unknown`` outside a git tree."""
    commit = os.environ.get("FRUGALRL_GIT_COMMIT")
    if commit:
        return commit
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path or Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def git_dirty(path: Path | None = None) -> bool:
    """Whether the checkout has uncommitted changes to tracked files (then the commit alone does not reproduce).

    ``FRUGALRL_GIT_DIRTY`` answers instead where there is no checkout: the step image records its build's.
    """
    recorded = os.environ.get("FRUGALRL_GIT_DIRTY")
    if recorded in ("true", "false"):
        return recorded == "true"
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=path or Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5, check=True,
        )  # fmt: skip
        return bool(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return False


def package_versions(names: Sequence[str] = AUDITED_PACKAGES) -> dict[str, str]:
    """Installed version of each distribution in ``names`` ("absent" when not installed)."""
    from importlib import metadata

    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def lineage_source(reference: str) -> str:
    """Where a pretrained input came from, as an MLflow URI when it has one.

    A registry or run URI stays as it is; a local directory (a pipeline artifact) is named by
    the model URI its summary.json recorded, so the registry links the policy to it.
    """
    if reference.startswith(("models:/", "runs:/")):
        return reference
    summary = Path(reference) / "summary.json"
    if summary.is_file():
        recorded = json.loads(summary.read_text())
        return recorded.get("model_uri") or recorded.get("registered_uri") or reference
    return reference


def pin_model_uri(uri: str) -> str:
    """What a run should record of a pretrained input, so that an audit finds the same one later.

    ``models:/NAME@ALIAS`` becomes ``models:/NAME/VERSION`` (an alias moves; a version does not).
    A local run directory that registered its model (a pipeline artifact: on a cluster, a path
    that is gone after the stage) becomes that registered version. Anything else stays.
    """
    summary = Path(uri) / "summary.json" if "://" not in uri and not uri.startswith("models:/") else None
    if summary is not None and summary.is_file():
        recorded = read_json_object(summary, "the pretrained run's", "pass the run directory its pretraining wrote")
        if recorded.get("registered_model") and recorded.get("registered_version"):
            return f"models:/{recorded['registered_model']}/{recorded['registered_version']}"
        return uri
    match = re.fullmatch(r"models:/([^/@]+)@([^/]+)", uri)
    if match is None:
        return uri
    try:
        version = registry_client().get_model_version_by_alias(match.group(1), match.group(2)).version
    except TrackingError:
        raise
    except Exception as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise TrackingError(f"{uri}: the registry cannot resolve it ({reason}); check the name and alias") from None
    return f"models:/{match.group(1)}/{version}"


def pin_pretrained(config: ExperimentConfig) -> tuple[ExperimentConfig, list[str]]:
    """The config with every registry alias it loads from (encoder, evaluator, PEFT source) pinned to
    the version it names now, and a line per pinned reference. config.yaml then records exactly
    what the run used, and an audit re-runs with it even after the alias has moved."""
    notes: list[str] = []

    def pinned(value: str | None, what: str) -> str | None:
        if value is None:
            return None
        fixed = pin_model_uri(value)
        if fixed != value:
            notes.append(f"{what} {value} is {fixed}: pinned for this run")
        return fixed

    updates: dict[str, Any] = {}
    if config.latent_curriculum and config.latent.encoder_from:
        latent = config.latent.model_copy(update={"encoder_from": pinned(config.latent.encoder_from, "encoder")})
        updates["latent"] = latent
    if config.pivot.evaluator_from:  # the pivot selector's settings
        settings = {**config.selection.settings, "evaluator_from": pinned(config.pivot.evaluator_from, "evaluator")}
        updates["selection"] = config.selection.model_copy(update={"settings": settings})
    if config.peft is not None and config.peft.source:
        updates["peft"] = config.peft.model_copy(update={"source": pinned(config.peft.source, "PEFT source")})
    return (config.model_copy(update=updates) if notes else config), notes


def pretrained_inputs(config: ExperimentConfig) -> dict[str, str]:
    """Lineage tags naming the encoder, evaluator or source policy a run was built on."""
    tags = {}
    if config.latent_curriculum and config.latent.encoder_from:
        tags["frugalrl.lineage.encoder"] = lineage_source(config.latent.encoder_from)
    if config.pivot.evaluator_from:
        tags["frugalrl.lineage.evaluator"] = lineage_source(config.pivot.evaluator_from)
    if config.peft is not None and config.peft.source:
        tags["frugalrl.lineage.peft_source"] = lineage_source(config.peft.source)
    return tags


def lineage_tags(config: ExperimentConfig, pipeline_run_id: str | None = None) -> dict[str, str]:
    """Tags that tie a run to its code, config, seed, packages, image, pretrained inputs and pipeline run.

    ``pipeline_run_id`` is the pipeline run the caller works for; ``None`` falls back to
    ``FRUGALRL_PIPELINE_RUN_ID`` (set on a container from outside), then to ``none``.
    """
    if pipeline_run_id is None:
        pipeline_run_id = os.environ.get(PIPELINE_RUN_ENV, "none")
    packages = {f"frugalrl.pkg.{name}": version for name, version in package_versions().items()}
    return {
        **packages,
        **pretrained_inputs(config),
        "frugalrl.image_digest": os.environ.get(IMAGE_DIGEST_ENV, "unknown"),
        "frugalrl.image": os.environ.get(IMAGE_REF_ENV, "none"),
        "frugalrl.image_with": os.environ.get(IMAGE_WITH_ENV, "[]"),  # frugalrl image build --with: what it added
        "frugalrl.git_dirty": str(git_dirty()).lower(),
        "frugalrl.git_commit": git_commit(),
        "frugalrl.config_hash": config.hash(),
        "frugalrl.seed": str(config.seed),
        "frugalrl.version": __version__,
        "frugalrl.env_id": config.env.id,
        "frugalrl.algo": config.algo,
        "frugalrl.pipeline_run_id": pipeline_run_id,
    }
