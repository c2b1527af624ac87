"""MLflow tracking: runs, lineage tags, models, the registry and its aliases.

The tracking URI comes from ``MLFLOW_TRACKING_URI``; without it, ``sqlite:///mlflow.db`` in
the working directory (made absolute, so pipeline steps in other directories share it).
``check_tracking`` fails fast with a one-line ``TrackingError`` before any training starts.
"""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from frugalrl import __version__
from frugalrl.config import ExperimentConfig, PromotionConfig, flatten
from frugalrl.errors import TrackingError

PIPELINE_RUN_ENV = "FRUGALRL_PIPELINE_RUN_ID"


def tracking_uri() -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if uri:
        return uri
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def check_tracking(uri: str | None = None, timeout_s: float = 5.0) -> str:
    """Make sure the tracking store answers; return the URI. Raises ``TrackingError``."""
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s) as response:
                if response.status != 200:
                    raise TrackingError(
                        f"MLflow server {uri} answered HTTP {response.status} on /health; check the server"
                    )
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(
                f"MLflow server {uri} is unreachable ({reason}); start it or unset MLFLOW_TRACKING_URI "
                "to use the local sqlite store"
            ) from None
    elif uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.is_absolute():
            db = Path.cwd() / db
        folder = db.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise TrackingError(
                f"MLflow store {uri}: folder {folder} is missing or not writable; fix MLFLOW_TRACKING_URI"
            )
    elif uri.startswith(("postgresql", "mysql", "file:", "databricks")) or "://" not in uri:
        pass  # the mlflow client reports these itself on first use
    return uri


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


AUDITED_PACKAGES = ("torch", "numpy", "gymnasium", "ale-py", "mujoco", "mlflow", "optuna", "peft", "kfp")
IMAGE_DIGEST_ENV = "FRUGALRL_IMAGE_DIGEST"


def git_dirty(path: Path | None = None) -> bool:
    """Whether the checkout has uncommitted changes to tracked files (then the commit alone does not reproduce)."""
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
    import json

    if reference.startswith(("models:/", "runs:/")):
        return reference
    summary = Path(reference) / "summary.json"
    if summary.is_file():
        recorded = json.loads(summary.read_text())
        return recorded.get("model_uri") or recorded.get("registered_uri") or reference
    return reference


def pretrained_inputs(config: ExperimentConfig) -> dict[str, str]:
    """Lineage tags naming the encoder, evaluator or source policy a run was built on."""
    tags = {}
    if config.latent.enabled and config.latent.encoder_from:
        tags["frugalrl.lineage.encoder"] = lineage_source(config.latent.encoder_from)
    if config.pivot.evaluator_from:
        tags["frugalrl.lineage.evaluator"] = lineage_source(config.pivot.evaluator_from)
    if config.peft is not None and config.peft.source:
        tags["frugalrl.lineage.peft_source"] = lineage_source(config.peft.source)
    return tags


def lineage_tags(config: ExperimentConfig) -> dict[str, str]:
    """Tags that tie a run to its code, config, seed, packages, image, pretrained inputs and pipeline run."""
    packages = {f"frugalrl.pkg.{name}": version for name, version in package_versions().items()}
    return {
        **packages,
        **pretrained_inputs(config),
        "frugalrl.image_digest": os.environ.get(IMAGE_DIGEST_ENV, "unknown"),
        "frugalrl.git_dirty": str(git_dirty()).lower(),
        "frugalrl.git_commit": git_commit(),
        "frugalrl.config_hash": config.hash(),
        "frugalrl.seed": str(config.seed),
        "frugalrl.version": __version__,
        "frugalrl.env_id": config.env.id,
        "frugalrl.algo": config.algo,
        "frugalrl.pipeline_run_id": os.environ.get(PIPELINE_RUN_ENV, "none"),
    }


class RunTracker:
    """One MLflow run. Use as a context manager; the run ends FAILED if the block raises."""

    def __init__(self, config: ExperimentConfig, run_id: str | None = None, run_name: str | None = None):
        import mlflow

        self.mlflow = mlflow
        self.config = config
        self.uri = check_tracking()
        mlflow.set_tracking_uri(self.uri)
        self._resume_id = run_id
        self._run_name = run_name or config.name
        self.run_id: str | None = None

    def __enter__(self) -> RunTracker:
        mlflow = self.mlflow
        try:
            mlflow.set_experiment(self.config.tracking.experiment)
            run = mlflow.start_run(run_id=self._resume_id, run_name=None if self._resume_id else self._run_name)
        except Exception as exc:
            raise TrackingError(
                f"MLflow store {self.uri} cannot start a run ({str(exc).splitlines()[0][:160]})"
            ) from None
        self.run_id = run.info.run_id
        if self._resume_id is None:
            params = {key: str(value)[:500] for key, value in flatten(self.config.to_dict()).items()}
            mlflow.log_params(params)
        mlflow.set_tags(lineage_tags(self.config))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.mlflow.end_run(status="FINISHED" if exc_type is None else "FAILED")

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and np.isfinite(v)}
        self.mlflow.log_metrics(clean, step=step)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def log_policy(self, policy: Any, input_example: np.ndarray) -> str:
        """Log the exported policy as an MLflow PyTorch model; returns its model URI."""
        import mlflow.pytorch
        import torch

        # Pickle format and explicit requirements: skips torch.export and a slow
        # requirements-inference subprocess (together ~10 s per run on a small CPU).
        requirements = [f"frugalrl=={__version__}", f"torch=={torch.__version__.split('+')[0]}"]
        info = mlflow.pytorch.log_model(
            policy,
            name="policy",
            input_example=input_example,
            serialization_format="pickle",
            pip_requirements=requirements,
        )
        self.mlflow.set_tag("frugalrl.policy_uri", info.model_uri)
        return info.model_uri


# ---------------------------------------------------------------------------- registry
def registry_client() -> Any:
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(check_tracking())
    return MlflowClient()


def task_name(env_id: str) -> str:
    """``ALE/Breakout-v5`` -> ``breakout``, ``CartPole-v1`` -> ``cartpole``: the prefix of registered names."""
    return env_id.split("/")[-1].split("-v")[0].lower()


def register_model(
    model_uri: str, name: str, run_id: str, score: float, score_name: str, tags: dict[str, str] | None = None
) -> str:
    """Register ``model_uri`` as a new version of ``name``, tagged with the score promotion compares.

    ``score`` is the evaluation mean return for policies, the held-out Spearman correlation for
    importance evaluators. Returns the new version number.
    """
    import mlflow

    client = registry_client()
    version = mlflow.register_model(model_uri, name, tags={"frugalrl.run_id": run_id, **(tags or {})})
    client.set_model_version_tag(name, version.version, "frugalrl.score", f"{score:.6f}")
    client.set_model_version_tag(name, version.version, "frugalrl.score_name", score_name)
    return str(version.version)


def promote_if_better(name: str, version: str, score: float) -> dict[str, Any]:
    """Alias ``version`` as ``challenger``; move ``champion`` to it if it beats the champion.

    Returns the decision and its evidence. The first registered version becomes champion.
    (A statistical gate replaces the plain comparison in the production pipeline.)
    """
    client = registry_client()
    client.set_registered_model_alias(name, "challenger", version)
    try:
        champion = client.get_model_version_by_alias(name, "champion")
    except Exception:
        champion = None
    if champion is None:
        client.set_registered_model_alias(name, "champion", version)
        return {
            "promoted": True,
            "reason": "first model: no champion yet",
            "champion_version": version,
            "challenger_score": score,
            "champion_score": None,
        }
    champion_score = float(champion.tags.get("frugalrl.score", "-inf"))
    promoted = score > champion_score
    if promoted:
        client.set_registered_model_alias(name, "champion", version)
    return {
        "promoted": promoted,
        "reason": f"challenger {score:.2f} {'>' if promoted else '<='} champion {champion_score:.2f}",
        "champion_version": version if promoted else str(champion.version),
        "challenger_score": score,
        "champion_score": champion_score,
    }


def gate_promotion(
    name: str, version: str, run_id: str, returns: list[float], eval_seed: int, promotion: PromotionConfig
) -> dict[str, Any]:
    """Alias ``version`` as ``challenger``; move ``champion`` to it only if ``frugalrl.promotion``'s test says so.

    The evaluation returns and their seed are stored as version tags, so the next challenger is
    compared on the same seeds; the decision and its evidence go to the version's tags and to
    the challenger's MLflow run.
    """
    import json

    from frugalrl.promotion import GateDecision, decide

    client = registry_client()
    client.set_registered_model_alias(name, "challenger", version)
    client.set_model_version_tag(name, version, "frugalrl.eval_returns", json.dumps([round(r, 4) for r in returns]))
    client.set_model_version_tag(name, version, "frugalrl.eval_seed", str(eval_seed))
    try:
        champion = client.get_model_version_by_alias(name, "champion")
    except Exception:
        champion = None
    if champion is not None and champion.tags.get("frugalrl.eval_seed") != str(eval_seed):
        decision = GateDecision(
            False, f"champion v{champion.version} was evaluated on other seeds: not comparable, champion kept",
            "none", float(sum(returns) / len(returns)), None, None, None, None, None, len(returns), 0,
        )  # fmt: skip
    else:
        theirs = json.loads(champion.tags["frugalrl.eval_returns"]) if champion is not None else None
        decision = decide(returns, theirs, promotion)
    if decision.promoted:
        client.set_registered_model_alias(name, "champion", version)
    client.set_model_version_tag(name, version, "frugalrl.promotion", decision.reason[:5000])
    client.set_tag(run_id, "frugalrl.promotion", decision.reason[:5000])
    client.set_tag(run_id, "frugalrl.promoted", str(decision.promoted).lower())
    for key in ("p_value", "difference", "ci_low", "ci_high"):
        value = getattr(decision, key)
        if value is not None:
            client.log_metric(run_id, f"promotion_{key}", float(value))
    return {
        **decision.as_dict(),
        "champion_version": version if decision.promoted or champion is None else str(champion.version),
        "challenger_score": decision.challenger_mean,
        "champion_score": decision.champion_mean,
    }


def fetch_artifact_file(uri: str, filename: str, what: str, fix: str) -> Path:
    """Download an MLflow artifact (``models:/name@alias``, ``runs:/...``) and find ``filename`` in it."""
    import mlflow
    import mlflow.artifacts

    mlflow.set_tracking_uri(check_tracking())
    try:
        local = mlflow.artifacts.download_artifacts(artifact_uri=uri)
    except Exception as exc:
        reason = str(exc).splitlines()[0][:160]
        raise TrackingError(f"cannot fetch {what} {uri} from MLflow ({reason}); check the name and alias") from None
    found = sorted(Path(local).rglob(filename))
    if not found:
        raise TrackingError(f"{uri} holds no {filename}; {fix}")
    return found[0]


def log_and_register(
    config: ExperimentConfig,
    run_name: str,
    summary: dict[str, Any],
    files: list[Path],
    model: Any,
    kind: str,
    score_key: str,
    score_name: str,
) -> dict[str, Any]:
    """One MLflow run for a pretrained model (encoder, evaluator): numeric summary as metrics, the
    files as artifacts, the module as a pickled MLflow PyTorch model carrying ``files[-1]``, then
    registration as ``<task>-<kind>`` with ``summary[score_key]`` as its score, tagged ``score_name``
    (alias ``champion`` moves when it improves)."""
    import mlflow
    import mlflow.pytorch
    import torch

    with RunTracker(config, run_name=run_name) as tracker:
        numeric = {k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        tracker.log_metrics(numeric, step=0)
        mlflow.set_tag("frugalrl.dataset_sha256", summary["dataset_sha256"])
        for path in files:
            tracker.log_artifact(path, artifact_path=kind)
        info = mlflow.pytorch.log_model(
            model,
            name=kind,
            serialization_format="pickle",
            extra_files=[str(files[-1])],
            pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
        )
        run_id = tracker.run_id
    name = f"{task_name(config.env.id)}-{kind}"
    score = float(summary[score_key])
    version = register_model(info.model_uri, name, run_id, score, score_name)
    decision = promote_if_better(name, version, score)
    return {"mlflow_run_id": run_id, "model_uri": info.model_uri, "registered_model": name,
            "registered_version": version, "promoted": decision["promoted"]}  # fmt: skip
