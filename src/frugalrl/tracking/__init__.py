"""MLflow tracking, one job per module:

- ``store``: where the tracking store is and whether it answers (``check_tracking``);
- ``provenance``: git, packages and lineage tags of a run;
- ``runs``: ``RunTracker``, one MLflow run;
- ``registry``: registration and the two promotion paths, sharing one champion routine;
- ``artifacts``: ``resolve_artifact``, the one way from a path or MLflow URI to a local file.

The names below stay importable from ``frugalrl.tracking`` for existing callers. They are loaded on
first use (PEP 562), so importing one submodule (``frugalrl.tracking.artifacts``) does not import the
others: the package itself then adds no import edge, and no import cycle hides behind it.
"""

from __future__ import annotations

from frugalrl.lazy_names import lazy_names

_HOME = {  # name -> the submodule that defines it
    **dict.fromkeys(["MLFLOW_PREFIXES", "is_mlflow_uri", "resolve_artifact"], "artifacts"),
    **dict.fromkeys(
        [
            "AUDITED_PACKAGES",
            "IMAGE_DIGEST_ENV",
            "PIPELINE_RUN_ENV",
            "git_commit",
            "git_dirty",
            "lineage_source",
            "lineage_tags",
            "package_versions",
            "pretrained_inputs",
        ],
        "provenance",
    ),  # fmt: skip
    **dict.fromkeys(
        ["challenge", "gate_promotion", "log_and_register", "promote_if_better", "register_model", "task_name"],
        "registry",
    ),
    "RunTracker": "runs",
    **dict.fromkeys(["check_tracking", "registry_client", "tracking_uri"], "store"),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, globals(), _HOME)
