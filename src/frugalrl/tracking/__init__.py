"""MLflow tracking, one job per module:

- ``store``: where the tracking store is and whether it answers (``check_tracking``);
- ``provenance``: git, packages and lineage tags of a run;
- ``runs``: ``RunTracker``, one MLflow run;
- ``registry``: registration and the two promotion paths, sharing one champion routine;
- ``artifacts``: ``resolve_artifact``, the one way from a path or MLflow URI to a local file.

The names below stay importable from ``frugalrl.tracking`` for existing callers.
"""

from __future__ import annotations

from frugalrl.tracking.artifacts import MLFLOW_PREFIXES, is_mlflow_uri, resolve_artifact
from frugalrl.tracking.provenance import (
    AUDITED_PACKAGES,
    IMAGE_DIGEST_ENV,
    PIPELINE_RUN_ENV,
    git_commit,
    git_dirty,
    lineage_source,
    lineage_tags,
    package_versions,
    pretrained_inputs,
)
from frugalrl.tracking.registry import (
    challenge,
    gate_promotion,
    log_and_register,
    promote_if_better,
    register_model,
    registry_client,
    task_name,
)
from frugalrl.tracking.runs import RunTracker
from frugalrl.tracking.store import check_tracking, tracking_uri

fetch_artifact_file = resolve_artifact  # the old name: same arguments, now also accepts a local path

__all__ = [
    "AUDITED_PACKAGES",
    "IMAGE_DIGEST_ENV",
    "MLFLOW_PREFIXES",
    "PIPELINE_RUN_ENV",
    "RunTracker",
    "challenge",
    "check_tracking",
    "fetch_artifact_file",
    "gate_promotion",
    "git_commit",
    "git_dirty",
    "is_mlflow_uri",
    "lineage_source",
    "lineage_tags",
    "log_and_register",
    "package_versions",
    "pretrained_inputs",
    "promote_if_better",
    "register_model",
    "registry_client",
    "resolve_artifact",
    "task_name",
    "tracking_uri",
]
