"""Which optional part of frugalrl a missing third-party module belongs to, for the one-line error.

The core install (``pip install frugalrl``) trains, evaluates, tunes and tracks. The Kubeflow layer,
the step images, cluster jobs and the MLflow server come with ``frugalrl[pipelines]``; LoRA and the
other tuner-based PEFT methods with ``frugalrl[peft]`` (pyproject.toml lists both). A command that
reaches for a module of an extra that is not installed ends in one line naming the extra to install.
"""

from __future__ import annotations

# top-level import name -> the extra that installs it
EXTRA_OF = {
    "kfp": "pipelines",
    "kubernetes": "pipelines",
    "kubeflow": "pipelines",
    "kubeflow_trainer_api": "pipelines",
    "kubernetes_validate": "pipelines",
    "docker": "pipelines",
    "flask": "pipelines",  # the MLflow server (full mlflow)
    "peft": "peft",
    "transformers": "peft",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The one-line message for a module of an extra that is not installed; None for any other module."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return f"this needs frugalrl's {extra} extra ({top} is not installed): pip install 'frugalrl[{extra}]'"
