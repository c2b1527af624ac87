"""A real MLflow tracking server on PostgreSQL: the pipeline runs against it end to end.

The server is `mlflow server` on 127.0.0.1 with a fresh Postgres database (the machine's
PostgreSQL, trust auth) and a local artifact directory served through the server
(``--artifacts-destination``), as the Kubernetes deployment in ``infra/`` runs it.
Everything is checked through the REST client: runs, registered models, aliases, artifacts.

Here the DAG's PivotRL branch (evaluator, an Optuna worker, tuned training, evaluation, promotion,
report) runs from this checkout, every stage an isolated subprocess, and its policy is audited. The
whole DAG (``TEST_PROFILE``, every branch), compiled for a cluster and executed from its IR, every
step in a container of the step image, is ``test_cluster_execution.py``: that one DAG run per CI
run checks the encoder, curriculum and PEFT branches too.
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
            "overrides": ["ppo.total_timesteps=2048", "ppo.update_epochs=2", "selection.settings.warmup_steps=512",
                          "selection.settings.evaluator.pretrain_steps=1024", "eval.episodes=2", "name=server-test",
                          "selection.settings.evaluator.champion_min_spearman=-1"],  # a test-budget evaluator may serve
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


# The branch this test runs: the train stage with its evaluator and tuning.
SERVER_PROFILE = {"name": "ci", "stages": {k: TEST_PROFILE["stages"][k] for k in ("train", "tune")}}


@dataclass(frozen=True)
class DagRun:
    url: str  # the MLflow server, on a fresh Postgres database
    out: str  # what `frugalrl pipeline run` printed
    tmp: Path  # the module's directory (the run's root is tmp / "root")


@pytest.fixture(scope="module")
def server_dag(tmp_path_factory) -> Iterator[DagRun]:
    """The DAG's PivotRL branch at a test budget against ``mlflow server`` on Postgres, isolated (as a
    cluster runs it: each stage sees only the artifacts it declares as inputs)."""
    tmp = tmp_path_factory.mktemp("server-dag")
    profile = tmp / "ci.yaml"
    profile.write_text(yaml.safe_dump(SERVER_PROFILE))
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
def test_the_pivot_branch_isolated_on_a_postgres_mlflow_server(server_dag, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_dag.url)
    _check_the_subprocess_run(server_dag, tmp_path)


def _check_the_subprocess_run(server_dag: DagRun, tmp_path: Path) -> None:
    mlflow_server, out = server_dag.url, server_dag.out
    assert "FAILED" not in out and "(isolated:" in out, out[-2000:]
    last = [line for line in out.splitlines() if line.endswith(" stages)")][-1]  # "(3 s; 8 of 8 stages)"
    done, _, total = last.removesuffix(" stages)").split()[-3:]
    assert done == total and int(total) >= 7, last  # evaluator, tuning, training, evaluation, promotion, report
    assert f"MLflow UI: open {mlflow_server}" in out
    report = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: "))
    page = Path(report).read_text()
    assert Path(report).name.endswith("-report.html") and "promot" in page.lower()

    client = MlflowClient(tracking_uri=mlflow_server)
    assert client.get_model_version_by_alias("cartpole-evaluator", "champion").version == "1"
    decided = client.get_model_version("cartpole-policy", "1").tags["frugalrl.promotion"]
    if "first model beats the random policy" in decided:  # a first version beats the random policy, or waits
        assert client.get_model_version_by_alias("cartpole-policy", "champion").version == "1"
    else:
        assert "first model does not beat the random policy" in decided, decided
        with pytest.raises(MlflowException):
            client.get_model_version_by_alias("cartpole-policy", "champion")
    champion = client.get_model_version_by_alias("cartpole-policy", "challenger")  # this run's version, gated
    assert champion.version == "1"
    assert champion.tags["frugalrl.promotion"] and len(json.loads(champion.tags["frugalrl.eval_returns"])) == 10
    run = client.get_run(champion.run_id)
    assert run.data.params["ppo.total_timesteps"] == "2048"
    tags = run.data.tags
    assert tags["frugalrl.pipeline_run_id"] not in ("", "none") and "frugalrl.pkg.torch" in tags
    assert tags["frugalrl.lineage.evaluator"].startswith("models:/")  # which evaluator trained this policy
    assert any(k.startswith("ppo.learning_rate") for k in run.data.params)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/summary.json", "run/config.yaml", "run/policy.pt", "run/metrics.jsonl"} <= artifacts
    assert [a.path for a in client.list_artifacts(run.info.run_id, "report")] == ["report/report.html"]
    trials = client.search_runs([run.info.experiment_id], "tags.mlflow.parentRunId != ''")
    assert len(trials) >= 2  # one nested MLflow run per Optuna trial
    if not git_dirty():  # the audit re-runs committed code only
        from frugalrl.ops.audit import audit

        result = audit(champion.run_id, keep=tmp_path / "audit")
        assert result["reproduced"], result["differences"]
