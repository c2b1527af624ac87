"""`frugalrl audit`: a tracked CPU run re-run on its recorded commit reproduces bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from frugalrl.ops.audit import AuditError, audit, compare_metrics
from frugalrl.tracking import check_tracking, git_dirty
from frugalrl.training import train

from .conftest import IN_CI, tiny_config


def test_metric_comparison_ignores_timing_and_finds_changes():
    recorded = [{"update": 1, "policy_loss": 0.5, "sps": 100.0}, {"update": 2, "policy_loss": 0.25, "sps": 90.0}]
    same = [{"update": 1, "policy_loss": 0.5, "sps": 7.0}, {"update": 2, "policy_loss": 0.25, "sps": 8.0}]
    assert compare_metrics(recorded, same, 0.0) == []
    changed = [{"update": 1, "policy_loss": 0.5}, {"update": 2, "policy_loss": 0.2500001}]
    assert "policy_loss" in compare_metrics(recorded, changed, 0.0)[0]
    assert compare_metrics(recorded, changed, 1e-3) == []


@pytest.mark.slow
@pytest.mark.skipif(
    not IN_CI and git_dirty(),
    reason="the checkout has uncommitted changes: runs from it cannot be audited (in CI this test runs)",
)
def test_audit_reproduces_a_cpu_run_and_catches_a_tampered_record(tmp_path, capsys):
    mlflow.set_tracking_uri(check_tracking())
    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    result = audit(summary["mlflow_run_id"], keep=tmp_path / "audit")
    assert result["reproduced"], result["differences"]
    assert result["criterion"] == "bit-identical"
    assert json.loads((tmp_path / "audit" / "audit.json").read_text())["reproduced"]

    # Tamper with the recorded metrics in the artifact store: the audit must notice.
    run = MlflowClient().get_run(summary["mlflow_run_id"])
    stored = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="run/metrics.jsonl")
    lines = [json.loads(line) for line in Path(stored).read_text().splitlines()]
    lines[3]["policy_loss"] += 1e-6
    tampered = tmp_path / "metrics.jsonl"
    tampered.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with mlflow.start_run(run_id=run.info.run_id):
        mlflow.log_artifact(str(tampered), artifact_path="run")
    result = audit(summary["mlflow_run_id"], keep=tmp_path / "audit2")
    assert not result["reproduced"]
    assert any("update line 4: policy_loss" in d for d in result["differences"])


@pytest.mark.slow
@pytest.mark.skipif(
    not IN_CI and git_dirty(),
    reason="the checkout has uncommitted changes: runs from it cannot be audited (in CI this test runs)",
)
def test_a_run_made_in_another_image_is_not_called_reproduced_unless_allowed(tmp_path, monkeypatch):
    digest, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    monkeypatch.setenv("FRUGALRL_IMAGE_DIGEST", digest)  # what a pipeline step in that image has
    mlflow.set_tracking_uri(check_tracking())
    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    assert MlflowClient().get_run(summary["mlflow_run_id"]).data.tags["frugalrl.image_digest"] == digest

    monkeypatch.setenv("FRUGALRL_IMAGE_DIGEST", other)
    refused = audit(summary["mlflow_run_id"], keep=tmp_path / "a1")
    assert not refused["reproduced"]
    assert refused["differences"] == [
        f"image digest differs: the run used {digest}, this re-run {other}; "
        "re-run in the run's image, or pass --allow-image-change"
    ]
    allowed = audit(summary["mlflow_run_id"], keep=tmp_path / "a2", allow_image_change=True)
    assert allowed["reproduced"] and allowed["differences"] == []
    assert allowed["notes"] == [f"image digest differs: the run used {digest}, this re-run {other} (allowed: "
                                "--allow-image-change)"]  # fmt: skip


@pytest.mark.slow
def test_run_without_commit_cannot_be_audited(tmp_path, monkeypatch):
    monkeypatch.setenv("FRUGALRL_GIT_COMMIT", "unknown")
    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    with pytest.raises(AuditError, match="no git commit"):
        audit(summary["mlflow_run_id"])


@pytest.mark.slow
@pytest.mark.skipif(
    not IN_CI and git_dirty(),
    reason="the checkout has uncommitted changes: runs from it cannot be audited (in CI this test runs)",
)
def test_an_audit_re_runs_with_the_evaluator_version_the_run_used_after_the_alias_moved(tmp_path):
    from frugalrl.pivot.pretrain import pretrain_evaluator

    from .test_pivot_pretrain import _pivot_config

    mlflow.set_tracking_uri(check_tracking())
    client = MlflowClient()
    evaluator = {"pretrain_steps": 1024, "pretrain_epochs": 3, "champion_min_spearman": -1.0}
    first = pretrain_evaluator(
        _pivot_config(tracking={"enabled": True}, settings={"evaluator": evaluator}), tmp_path / "e1"
    )
    config = _pivot_config(
        tracking={"enabled": True}, settings={"evaluator_from": "models:/cartpole-evaluator@champion"}
    )
    summary = train(config, tmp_path / "run", interactive=False)
    recorded = (tmp_path / "run" / "config.yaml").read_text()
    assert f"models:/cartpole-evaluator/{first['registered_version']}" in recorded  # pinned, not the alias
    # another evaluator takes the alias after the run
    second = pretrain_evaluator(
        _pivot_config(seed=9, tracking={"enabled": True}, settings={"evaluator": evaluator}), tmp_path / "e2"
    )
    client.set_registered_model_alias("cartpole-evaluator", "champion", second["registered_version"])
    result = audit(summary["mlflow_run_id"], keep=tmp_path / "audit")
    assert result["reproduced"], result["differences"]  # re-run with version 1, not today's champion
