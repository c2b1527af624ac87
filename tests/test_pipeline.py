"""The first pipeline: compiled to IR, and run end to end with kfp.local and a real MLflow store."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from mlflow import MlflowClient

from frugalrl.cli import main

from .conftest import REPO


def test_pipeline_compiles_to_kubeflow_ir(tmp_path, capsys):
    output = tmp_path / "pipeline.yaml"
    image = "registry.example.com/frugalrl@sha256:" + "a" * 64
    main(["pipeline", "compile", "-o", str(output), "--image", image])
    assert f"image: {image} (from --image)" in capsys.readouterr().out
    ir, platform = yaml.safe_load_all(output.read_text())  # the graph, and its Kubernetes placement
    assert ir["pipelineInfo"]["name"] == "frugalrl-train"
    tasks = ir["root"]["dag"]["tasks"]
    assert set(tasks) == {"train", "evaluate-and-register"}
    assert tasks["evaluate-and-register"]["dependentTasks"] == ["train"]
    inner = ir["components"][tasks["evaluate-and-register"]["componentRef"]["name"]]["dag"]["tasks"]
    assert sorted(inner["register"]["dependentTasks"]) == ["evaluate"]  # the gate reads the evaluation
    train_outputs = ir["components"]["comp-train"]["outputDefinitions"]["artifacts"]
    assert train_outputs["model"]["artifactType"]["schemaTitle"] == "system.Model"
    assert train_outputs["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    # a training pipeline's config is a run-time parameter: every step on the CPU pool, tracking from the Secret
    executors = ir["deploymentSpec"]["executors"]
    placed = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(placed) == set(executors) == {"exec-train", "exec-evaluate", "exec-register"}
    for name, executor in executors.items():
        resources = executor["container"]["resources"]
        assert "accelerator" not in resources and resources["resourceCpuRequest"] and resources["resourceMemoryLimit"]
        assert executor["container"]["image"] == image
        assert int(placed[name]["activeDeadlineSeconds"]) >= 3600
        required = [e for e in placed[name]["secretAsEnv"] if not e["optional"]]
        assert [(e["secretName"], [k["envVar"] for k in e["keyToEnv"]]) for e in required] == [
            ("frugalrl-tracking", ["MLFLOW_TRACKING_URI"])
        ], name


# PivotRL at a test budget: a test-budget evaluator may serve whatever its ranking
PIVOT_BUDGET = ["ppo.total_timesteps=2048", "ppo.update_epochs=2", "selection.settings.warmup_steps=512",
                "selection.settings.evaluator.pretrain_steps=512", "selection.settings.evaluator.pretrain_epochs=2",
                "selection.settings.evaluator.champion_min_spearman=-1.0"]  # fmt: skip


@pytest.mark.slow
def test_local_pipeline_run_registers_champion(tmp_path, capsys):
    # enough steps that the first version beats the random policy, as a first champion must
    overrides = ["ppo.total_timesteps=8192", "eval.episodes=5", "name=pipeline-test"]
    args = ["pipeline", "run", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "--root", str(tmp_path / "root")]
    args += [arg for o in overrides for arg in ("--set", o)]
    main(args)
    out = capsys.readouterr().out
    assert "registered cartpole-policy version 1" in out
    # each champion's score beside its task's random-policy score (same seeds) and solved threshold
    line = r"champion: models:/cartpole-policy@champion \(version 1, eval mean [\d.]+; random [\d.]+, solved 475\)"
    assert re.search(line, out), out

    client = MlflowClient()
    champion = client.get_model_version_by_alias("cartpole-policy", "champion")
    challenger = client.get_model_version_by_alias("cartpole-policy", "challenger")
    assert str(champion.version) == str(challenger.version) == "1"
    run = client.get_run(champion.run_id)
    assert run.data.tags["frugalrl.pipeline_run_id"] not in ("", "none")
    assert run.data.metrics["eval_episodes"] == 5
    assert run.data.metrics["real_env_steps"] == 8192
    assert float(champion.tags["frugalrl.score"]) > 0
    assert "first model beats the random policy" in champion.tags["frugalrl.promotion"]
    assert champion.tags["frugalrl.config_hash"] == run.data.tags["frugalrl.config_hash"]

    # A second run, PivotRL's pipeline for the same task (its evaluator branch: collect, pretrain, register the
    # evaluator, train on it), registers version 2; champion moves only if it evaluates better.
    pivot = ["pipeline", "run", "--config", str(REPO / "configs/cartpole-pivot.yaml"), "--root", str(tmp_path / "root")]
    pivot += [arg for o in [*PIVOT_BUDGET, "eval.episodes=5"] for arg in ("--set", o)]
    main(pivot)
    capsys.readouterr()
    second = client.get_model_version("cartpole-policy", "2")
    now_champion = str(client.get_model_version_by_alias("cartpole-policy", "champion").version)
    promoted = client.get_run(second.run_id).data.tags["frugalrl.promoted"] == "true"
    assert now_champion == ("2" if promoted else "1")  # the gate decides, with its evidence on the version
    assert "paired t-test over seeds" in second.tags["frugalrl.promotion"]  # same seeds: the paired test
    assert len(json.loads(second.tags["frugalrl.eval_returns"])) == 5
    assert str(client.get_model_version_by_alias("cartpole-policy", "challenger").version) == "2"
    evaluator = client.get_model_version_by_alias("cartpole-evaluator", "champion")
    assert evaluator.tags["frugalrl.score_name"] == "heldout_spearman"
    trained = client.get_run(second.run_id).data
    assert trained.metrics["aux_flops"] > 0  # the evaluator was used
    assert trained.tags["frugalrl.lineage.evaluator"].startswith("models:/cartpole-evaluator/")
    assert trained.tags["frugalrl.pipeline_run_id"] not in ("", "none", run.data.tags["frugalrl.pipeline_run_id"])


@pytest.mark.slow
def test_failed_step_is_one_clear_line(tmp_path, capsys):
    import pytest

    overrides = ["ppo.total_timesteps=256", "ppo.update_epochs=1", "eval.episodes=1", "tracking.enabled=false"]
    args = ["pipeline", "run", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "--root", str(tmp_path / "root")]
    args += [arg for o in overrides for arg in ("--set", o)]
    with pytest.raises(SystemExit) as exit_info:
        main(args)  # register needs the MLflow model that train did not log
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "register" in err
