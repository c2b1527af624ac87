"""Evaluator pretraining, its MLflow registration, transfer by registry URI, and the pipeline branch."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pytest
import torch
import yaml
from mlflow import MlflowClient

from frugalrl.cli import main
from frugalrl.pivot import initial_evaluator, load_evaluator, load_evaluator_uri
from frugalrl.pivot.pretrain import collect_dataset, pretrain_evaluator, pretrain_from_dataset

from .conftest import CPU_IMAGE, REPO, tiny_config


def _pivot_config(**extra):
    settings = {"evaluator": {"pretrain_steps": 1024, "pretrain_epochs": 5}, **extra.pop("settings", {})}
    return tiny_config(selection={"kind": "pivot", "settings": settings}, **extra)


def test_collect_dataset_labels_every_sample(tmp_path):
    info = collect_dataset(_pivot_config(), tmp_path / "dataset.npz")
    assert info["samples"] == 1024
    assert len(info["sha256"]) == 64
    with np.load(tmp_path / "dataset.npz") as data:
        assert data["obs"].shape == (1024, 4)
        for kind in ("policy_gradient", "advantage"):
            labels = data[f"label_{kind}"]
            assert labels.shape == (1024,)
            assert labels.min() == 0.0 and labels.max() == 1.0  # ranks within each rollout


def test_pretraining_learns_to_rank_held_out_states(tmp_path):
    collect_dataset(_pivot_config(settings={"evaluator": {"pretrain_steps": 4096}}), tmp_path / "d.npz")
    config = _pivot_config(settings={"evaluator": {"pretrain_epochs": 20}})
    _, metrics = pretrain_from_dataset(config, tmp_path / "d.npz")
    assert metrics["test_samples"] == int(4096 * 0.2)
    assert metrics["spearman"] > metrics["spearman_before"]
    assert metrics["spearman"] > 0.1
    assert "spearman_vs_advantage" in metrics


@pytest.mark.slow
def test_pretraining_in_a_fresh_process_starts_from_the_seeded_weights(tmp_path):
    """torch seeds each new process at random: a pipeline step (its own process) must seed the evaluator
    it builds, or the same dataset and config give another evaluator on every run."""
    import subprocess
    import sys

    collect_dataset(_pivot_config(), tmp_path / "d.npz")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_pivot_config().model_dump(mode="json")))
    script = (
        "import sys, torch; from pathlib import Path; from frugalrl.config import load_config; "
        "from frugalrl.pivot.pretrain import pretrain_from_dataset; "
        "ev, m = pretrain_from_dataset(load_config(Path(sys.argv[1])), Path(sys.argv[2])); "
        "print(m['spearman_before'], sum(float(p.detach().sum()) for p in ev.parameters()))"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script, str(tmp_path / "c.yaml"), str(tmp_path / "d.npz")],
                       capture_output=True, text=True, check=True).stdout.split()
        for _ in range(2)
    ]  # fmt: skip
    assert runs[0] == runs[1]


def test_pretrain_command_writes_and_registers(tmp_path, capsys):
    path = tmp_path / "pivot.yaml"
    data = yaml.safe_load((REPO / "configs/cartpole-pivot.yaml").read_text())
    data["selection"]["settings"]["evaluator"].update(pretrain_steps=1024, pretrain_epochs=3)
    path.write_text(yaml.safe_dump(data))
    # the registry's floor: a version that does not rank states well enough never becomes champion
    sets = ["--set", "selection.settings.evaluator.champion_min_spearman=1.0"]
    main(["pretrain", "evaluator", "--config", str(path), "--out", str(tmp_path / "weak"), *sets])
    assert "version 1 (challenger, not champion: below the champion floor (spearman" in capsys.readouterr().out
    with pytest.raises(mlflow.exceptions.MlflowException):
        MlflowClient().get_model_version_by_alias("cartpole-evaluator", "champion")
    sets = ["--set", "selection.settings.evaluator.champion_min_spearman=-1.0"]  # any ranking clears it
    main(["pretrain", "evaluator", "--config", str(path), "--out", str(tmp_path / "ev"), *sets])
    out = capsys.readouterr().out
    assert "registered cartpole-evaluator version 2 (champion)" in out
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert summary["spearman"] == metrics["spearman"]
    assert summary["real_env_steps"] == 1024
    client = MlflowClient()
    champion = client.get_model_version_by_alias("cartpole-evaluator", "champion")
    assert champion.tags["frugalrl.score_name"] == "heldout_spearman"
    assert mlflow.models.get_model_info(summary["model_uri"]).signature is not None  # registered with a signature
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.tags["frugalrl.dataset_sha256"] == metrics["dataset_sha256"]

    # Round trip: the registered evaluator scores exactly like the file that was written.
    from_registry = load_evaluator_uri("models:/cartpole-evaluator@champion")
    from_file = load_evaluator(tmp_path / "ev")
    obs = torch.randn(16, 4)
    torch.testing.assert_close(from_registry(obs), from_file(obs))

    # Transfer: a config that names it starts from it (on Acrobot, hidden layers only).
    import gymnasium as gym

    config = _pivot_config(settings={"evaluator_from": "models:/cartpole-evaluator@champion"})
    evaluator, note = initial_evaluator(config.pivot, gym.spaces.Box(-1, 1, (4,)))
    torch.testing.assert_close(evaluator(obs), from_file(obs))
    # What pretraining cost (collecting with PPO, then the fit) travels with it, adapted or not.
    assert summary["total_flops"] == evaluator.pretrain_flops > summary["fit_flops"] > 0
    adapted, note = initial_evaluator(config.pivot, gym.spaces.Box(-1, 1, (6,)))
    assert "input layer re-initialised" in note and adapted.pretrain_flops == evaluator.pretrain_flops


def test_pretrain_without_tracking_and_bad_dataset(tmp_path):
    config = _pivot_config()
    summary = pretrain_evaluator(config, tmp_path / "ev")
    assert summary["mlflow_run_id"] is None
    assert (tmp_path / "ev" / "evaluator.pt").is_file()
    # the collecting PPO run goes through the run loop: one metrics.jsonl row per update, as every run
    rows = [json.loads(line) for line in (tmp_path / "ev" / "metrics.jsonl").read_text().splitlines()]
    updates = 1024 // (config.env.num_envs * config.ppo.num_steps)  # pretrain_steps in rollouts
    assert [row["update"] for row in rows] == list(range(1, updates + 1)) and rows[-1]["step"] == 1024
    assert all(row["sps"] > 0 and "policy_loss" in row for row in rows)
    assert not (tmp_path / "ev" / "checkpoint.pt").exists()  # a pretraining step keeps no checkpoint
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    from frugalrl.errors import CheckpointError

    with pytest.raises(CheckpointError, match="corrupt"):
        pretrain_from_dataset(config, tmp_path / "bad.npz")


def test_missing_registered_evaluator_is_a_clear_error():
    from frugalrl.errors import TrackingError

    with pytest.raises(TrackingError, match="cannot fetch evaluator models:/nope-evaluator@champion"):
        load_evaluator_uri("models:/nope-evaluator@champion")


def test_pipeline_gains_the_evaluator_branch_only_with_pivot(tmp_path):
    plain, pivot = tmp_path / "plain.yaml", tmp_path / "pivot.yaml"
    for output, config in ((plain, "configs/cartpole-ppo.yaml"), (pivot, "configs/cartpole-pivot.yaml")):
        main(["pipeline", "compile", "-o", str(output), "--config", str(REPO / config), "--image", CPU_IMAGE])
    # the IR is the first document; the cluster's platform spec follows
    plain_tasks = next(yaml.safe_load_all(plain.read_text()))["root"]["dag"]["tasks"]
    pivot_ir = next(yaml.safe_load_all(pivot.read_text()))
    pivot_tasks = pivot_ir["root"]["dag"]["tasks"]
    assert set(plain_tasks) == {"train", "evaluate-and-register"}
    assert set(pivot_tasks) == {"collect-rollouts", "pretrain", "train", "evaluate-and-register"}
    assert pivot_tasks["train"]["dependentTasks"] == ["pretrain"]
    assert pivot_tasks["pretrain"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "pivot"
    dataset = pivot_ir["components"]["comp-pretrain"]["inputDefinitions"]["artifacts"]["dataset"]
    assert dataset["artifactType"]["schemaTitle"] == "system.Dataset"
    assert {e["container"]["image"] for e in pivot_ir["deploymentSpec"]["executors"].values()} == {CPU_IMAGE}
