"""A real MLflow tracking server on PostgreSQL: the pipeline runs against it end to end.

The server is `mlflow server` on 127.0.0.1 with a fresh Postgres database (the machine's
PostgreSQL, trust auth) and a local artifact directory served through the server
(``--artifacts-destination``), as the Kubernetes deployment in ``infra/`` runs it.
Everything is checked through the REST client: runs, registered models, aliases, artifacts.

The DAG runs once (``server_dag``), every stage an isolated subprocess, and is checked. The same DAG
compiled for a cluster and executed from its IR, every step in a container of the step image, is
``test_cluster_execution.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from frugalrl.cli import main
from frugalrl.tracking import git_dirty

from .conftest import needs_postgres, running_mlflow_server

# The quick profile's stages and configs at a test budget: every branch of the production DAG
# (evaluator, Optuna workers, tuned training; encoder and curriculum; PEFT source and comparison).
TEST_PROFILE = {
    "name": "ci",
    "stages": {
        "train": {
            "config": "configs/cartpole-pivot.yaml",
            "overrides": ["ppo.total_timesteps=2048", "ppo.update_epochs=2", "pivot.warmup_steps=512",
                          "pivot.evaluator.pretrain_steps=1024", "eval.episodes=2", "name=server-test",
                          "pivot.evaluator.champion_min_spearman=-1"],  # a test-budget evaluator may serve
            "model_name": "cartpole-policy",
        },
        # One tune worker: two workers sharing a study split the trials by timing (which one takes the
        # config's own point, how many each runs), so two runs of the DAG could pick other parameters.
        "tune": {"workers": 1, "overrides": ["tuning.trials=2"]},
        "latent": {
            "config": "configs/breakout-latent.yaml",
            "overrides": ["total_real_steps=2048", "latent.collect_steps=512", "latent.pretrain_updates=5",
                          "latent.probe=false", "latent.virtual_num_envs=8", "eval.episodes=1",
                          "latent.champion_min_psnr_db=0",  # a 5-update encoder, below the registry's floor
                          "env.atari.max_episode_steps=2000"],
            "model_name": "breakout-policy",
        },
        "peft": {
            "config": "configs/peft-quick.yaml",
            "overrides": ["sac.total_timesteps=300", "sac.learning_starts=100", "sac.batch_size=32", "peft.steps=120",
                          "peft.warmup_steps=60", "peft.eval_episodes=1", "eval.episodes=1", "tracking.enabled=true"],
            "model_name": "pendulum-policy",
        },
    },
}  # fmt: skip


POLICIES = ("cartpole-policy", "breakout-policy", "pendulum-policy", "pendulum-policy-adapted")


@dataclass(frozen=True)
class DagRun:
    url: str  # the MLflow server, on a fresh Postgres database
    out: str  # what `frugalrl pipeline run` printed
    tmp: Path  # the module's directory (the run's root is tmp / "root")


@pytest.fixture(scope="module")
def server_dag(tmp_path_factory) -> Iterator[DagRun]:
    """The production DAG at a test budget against ``mlflow server`` on Postgres, isolated (as a
    cluster runs it: each stage sees only the artifacts it declares as inputs)."""
    tmp = tmp_path_factory.mktemp("server-dag")
    profile = tmp / "ci.yaml"
    profile.write_text(yaml.safe_dump(TEST_PROFILE))
    with running_mlflow_server(tmp) as url, pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", url)
        patch.setenv("OPTUNA_STORAGE", f"sqlite:///{tmp / 'optuna.db'}")
        patch.chdir(tmp)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            main(["pipeline", "run", "--profile", str(profile), "--root", str(tmp / "root"), "--isolated"])
        yield DagRun(url, printed.getvalue(), tmp)


@pytest.mark.slow
@needs_postgres
def test_the_production_dag_on_a_postgres_mlflow_server(server_dag, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_dag.url)
    _check_the_subprocess_run(server_dag, tmp_path)


def _check_the_subprocess_run(server_dag: DagRun, tmp_path: Path) -> None:
    mlflow_server, out = server_dag.url, server_dag.out
    assert "19 of 19 stages" in out and "FAILED" not in out and "(isolated:" in out
    assert f"MLflow UI: open {mlflow_server}" in out
    report = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: "))
    page = Path(report).read_text()
    assert Path(report).name.endswith("-report.html")
    assert "promot" in page.lower() and "<h3>PEFT comparison</h3>" in page  # a declared artifact: it arrived
    run_tree = max(Path(report).parent.rglob("report/html"), key=lambda p: p.stat().st_mtime).parents[1]
    assert [p.name for p in run_tree.glob("peft-compare/*")] != [] and not list(
        run_tree.glob("peft-compare/peft")
    )  # nothing undeclared was kept

    client = MlflowClient(tracking_uri=mlflow_server)
    for name in ("cartpole-evaluator", "breakout-encoder"):
        assert client.get_model_version_by_alias(name, "champion").version == "1", name
    for name in POLICIES:  # a first version becomes champion only if it beats the random policy (tiny budgets here)
        decided = client.get_model_version(name, "1").tags["frugalrl.promotion"]
        if "first model beats the random policy" in decided:
            assert client.get_model_version_by_alias(name, "champion").version == "1", name
        else:
            assert "first model does not beat the random policy" in decided, decided
            with pytest.raises(MlflowException):
                client.get_model_version_by_alias(name, "champion")
    champion = client.get_model_version_by_alias("cartpole-policy", "challenger")  # this run's version, gated
    assert champion.version == "1"
    assert champion.tags["frugalrl.promotion"] and len(json.loads(champion.tags["frugalrl.eval_returns"])) == 10
    run = client.get_run(champion.run_id)
    assert run.data.params["ppo.total_timesteps"] == "2048"
    tags = run.data.tags
    assert tags["frugalrl.pipeline_run_id"] not in ("", "none") and "frugalrl.pkg.torch" in tags
    assert tags["frugalrl.lineage.evaluator"].startswith("models:/")  # which evaluator trained this policy
    assert any(k.startswith("ppo.learning_rate") for k in run.data.params)
    latent = client.get_run(client.get_model_version_by_alias("breakout-policy", "challenger").run_id)
    assert latent.data.tags["frugalrl.lineage.encoder"].startswith("models:/")
    adapted = client.get_model_version_by_alias("pendulum-policy-adapted", "challenger")
    assert adapted.tags["frugalrl.peft.method"] in ("full", "lora", "bitfit")
    assert adapted.tags["frugalrl.lineage.peft_source"].startswith("models:/")
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/summary.json", "run/config.yaml", "run/policy.pt", "run/metrics.jsonl"} <= artifacts
    assert [a.path for a in client.list_artifacts(run.info.run_id, "report")] == ["report/report.html"]
    trials = client.search_runs([run.info.experiment_id], "tags.mlflow.parentRunId != ''")
    assert len(trials) >= 2  # one nested MLflow run per Optuna trial
    from frugalrl.policy_store import load_policy

    assert load_policy("models:/pendulum-policy-adapted@challenger").spec["env"]["id"] == "InvertedPendulum-v5"
    if not git_dirty():  # the audit re-runs committed code only
        from frugalrl.ops.audit import audit

        result = audit(champion.run_id, keep=tmp_path / "audit")
        assert result["reproduced"], result["differences"]
