"""Compile the pipeline to IR YAML, or run it here with kfp.local (the embedded default)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from kfp import compiler, local

from frugalrl.config import load_config
from frugalrl.errors import PipelineFailed
from frugalrl.tracking import check_tracking, task_name, tracking_uri
from pipelines.training import pipeline_for, pipeline_kind


def compile_pipeline(output: Path, config_path: Path | None = None, profile: str | None = None) -> Path:
    """Write Kubeflow IR YAML: the production DAG of ``profile``, or the training pipeline ``config_path``
    needs (the plain one without either)."""
    if profile is not None:
        from pipelines.production import build_pipeline, load_profile

        pipeline = build_pipeline(load_profile(profile))
    else:
        pipeline = pipeline_for(pipeline_kind(load_config(config_path)) if config_path else "plain")
    output.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(output))
    return output


@dataclass
class LocalRunResult:
    model_name: str
    version: str
    tracking_uri: str
    pipeline_root: Path
    eval_mean: float

    def lines(self) -> list[str]:
        return [
            f"registered {self.model_name} version {self.version} (eval mean {self.eval_mean:.2f})",
            f"step outputs: {self.pipeline_root}",
            f"MLflow store: {self.tracking_uri}  (open it: mlflow ui --backend-store-uri {self.tracking_uri})",
            f"champion: models:/{self.model_name}@champion",
        ]


def run_local(
    config_path: Path, overrides: list[str], model_name: str | None = None, root: Path = Path("pipeline_runs")
) -> LocalRunResult:
    """Run the pipeline on this machine: kfp.local SubprocessRunner(use_venv=False), MLflow sqlite by default."""
    config = load_config(config_path, overrides)  # fail fast on a bad config, before any step starts
    uri = check_tracking(tracking_uri())
    os.environ["MLFLOW_TRACKING_URI"] = uri  # steps run as subprocesses, possibly in other directories
    name = model_name or f"{task_name(config.env.id)}-policy"
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*non-Python base image.*")
        warnings.filterwarnings("ignore", message=".*have no effect in the current local runner.*")
        try:
            run = pipeline_for(pipeline_kind(config))(
                config_yaml=config_path.read_text(),
                overrides=overrides,
                model_name=name,
                eval_episodes=config.eval.episodes,
                eval_seed=config.eval.seed,
            )
        except RuntimeError as exc:  # kfp.local reports a failed task this way
            raise PipelineFailed(f"{str(exc).splitlines()[0]}; the step's log above says why") from None
    version = str(run.output)
    from frugalrl.tracking import registry_client

    tags = registry_client().get_model_version(name, version).tags
    return LocalRunResult(name, version, uri, root, float(tags.get("frugalrl.score", "nan")))
