"""Pretraining stages are declarations (``frugalrl.pretraining``): the pipelines build every stage's steps
from them, so a new technique with a pretraining stage is one module of that package.

The module is docs/architecture.md's example, taken from the page as it stands, so the page cannot
drift from what works: dropped into the package, it gets its own training pipeline, the production
wiring and the steps, with no file under pipelines/ or components/ changed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from frugalrl.pipelines.training import pipeline_for, pipeline_kind
from kfp import compiler

import frugalrl.pretraining
from frugalrl import pretraining
from frugalrl.errors import ConfigError
from frugalrl.ops.steps import collect_step, pretrain_step, train_step

from .conftest import REPO, tiny_config

ARCHITECTURE = REPO / "docs" / "architecture.md"
FIRST_LINE = "# src/frugalrl/pretraining/pivot_transfer.py"


def _example() -> str:
    for block in re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(), flags=re.S):
        if block.startswith(FIRST_LINE + "\n"):
            return block
    raise AssertionError(f"docs/architecture.md has no example starting {FIRST_LINE!r}")


@pytest.fixture
def pivot_transfer(monkeypatch, tmp_path):
    """The docs' module in the package (through an extra path entry) for this test."""
    where = tmp_path / "module"
    where.mkdir()
    (where / "pivot_transfer.py").write_text(_example())
    monkeypatch.setattr(frugalrl.pretraining, "__path__", [*frugalrl.pretraining.__path__, str(where)])
    yield
    pretraining.unregister("pivot_transfer")
    sys.modules.pop("frugalrl.pretraining.pivot_transfer", None)


def _acrobot_pivot(**extra):
    settings = {"evaluator": {"pretrain_steps": 512, "pretrain_epochs": 2}}
    return tiny_config(env={"id": "Acrobot-v1", "num_envs": 4}, selection={"kind": "pivot", "settings": settings},
                       **extra)  # fmt: skip


def test_the_built_in_stages_are_what_configs_need():
    assert {"pivot", "latent"} <= set(pretraining.stages())
    assert pretraining.needed_by(tiny_config()) is None
    pivot = pretraining.needed_by(tiny_config(selection={"kind": "pivot"}))
    assert pivot.override == "selection.settings.evaluator_from"
    assert pipeline_kind(tiny_config(selection={"kind": "pivot"})) == "pivot"
    with pytest.raises(ConfigError, match="pretraining stage 'nope' is not declared; known: .*latent.*pivot"):
        pretraining.stage("nope")


def test_a_config_needing_two_stages_is_one_clear_error():
    twin = pretraining.PretrainStage(
        "twin", "x", "x.", "selection.settings.evaluator_from", lambda c: True, "m:f", "m:g"
    )
    pretraining.register(twin)
    try:
        with pytest.raises(ConfigError, match="needs pretraining stages .*pivot.*twin.*give their results by path"):
            pretraining.needed_by(tiny_config(selection={"kind": "pivot"}))
    finally:
        pretraining.unregister("twin")


def test_the_docs_stage_gets_its_pipeline_and_replaces_pivot_where_both_apply(pivot_transfer, tmp_path):
    config = _acrobot_pivot()
    assert pipeline_kind(config) == "pivot_transfer"  # it specialises pivot: it runs instead
    assert pipeline_kind(tiny_config(selection={"kind": "pivot"})) == "pivot"  # CartPole: the built-in stage
    out = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline_for("pivot_transfer"), str(out))
    ir = next(yaml.safe_load_all(out.read_text()))  # the IR; the cluster's platform spec follows
    assert ir["pipelineInfo"]["name"] == "frugalrl-train-pivot-transfer"  # KFP's spelling
    tasks = ir["root"]["dag"]["tasks"]
    assert set(tasks) == {"collect-rollouts", "pretrain", "train", "evaluate-and-register"}
    for name in ("collect-rollouts", "pretrain", "train"):
        assert tasks[name]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "pivot_transfer"
    assert tasks["train"]["taskInfo"]["name"] == "train policy (PivotRL, transferred evaluator)"
    assert tasks["train"]["inputs"]["artifacts"]["pretrained"]["taskOutputArtifact"]["producerTask"] == "pretrain"


@pytest.mark.slow
def test_the_docs_stage_runs_collect_pretrain_train_as_the_components_call_them(pivot_transfer, tmp_path):
    text = json.dumps(_acrobot_pivot().to_dict())
    info = collect_step(text, [], str(tmp_path / "rollouts.npz"), "pivot_transfer")
    assert info["env_id"] == "CartPole-v1" and info["kind"] == "labelled_rollouts"  # the source task's rollouts
    summary = pretrain_step(text, [], str(tmp_path / "rollouts.npz"), str(tmp_path / "evaluator"), "pivot_transfer")
    assert summary["dataset_sha256"] == info["sha256"] and set(summary["metrics"]) == {"spearman", "final_loss"}
    assert (tmp_path / "evaluator" / "evaluator.pt").is_file()
    run = train_step(text, [], str(tmp_path / "run"), pretrained=str(tmp_path / "evaluator"), stage="pivot_transfer")
    assert run["env_id"] == "Acrobot-v1"
    config = yaml.safe_load((Path(tmp_path / "run") / "config.yaml").read_text())
    assert str(tmp_path / "evaluator") in json.dumps(config)  # the declaration's override set it
