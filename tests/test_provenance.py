"""The pipeline run id reaches a run's tags as an argument; the environment variable is only read."""

from __future__ import annotations

import json
import os

from mlflow import MlflowClient

from frugalrl.ops.steps import train_step
from frugalrl.tracking.provenance import PIPELINE_RUN_ENV, lineage_tags

from .conftest import tiny_config


def test_lineage_tags_take_the_pipeline_run_id_first(monkeypatch):
    config = tiny_config()
    monkeypatch.delenv(PIPELINE_RUN_ENV, raising=False)
    assert lineage_tags(config)["frugalrl.pipeline_run_id"] == "none"
    monkeypatch.setenv(PIPELINE_RUN_ENV, "from-outside")  # how a PyTorchJob pod receives it
    assert lineage_tags(config)["frugalrl.pipeline_run_id"] == "from-outside"
    assert lineage_tags(config, "p-7")["frugalrl.pipeline_run_id"] == "p-7"


def test_train_step_tags_its_run_without_touching_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(PIPELINE_RUN_ENV, raising=False)
    config = tiny_config(tracking={"enabled": True, "log_model": False}, ppo={"total_timesteps": 256})
    summary = train_step(json.dumps(config.to_dict()), [], str(tmp_path / "run"), pipeline_run_id="p-9")
    assert PIPELINE_RUN_ENV not in os.environ
    run = MlflowClient().get_run(summary["mlflow_run_id"])
    assert run.data.tags["frugalrl.pipeline_run_id"] == "p-9"
