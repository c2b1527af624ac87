"""A real MLflow tracking server on PostgreSQL: the pipeline runs against it end to end.

The server is `mlflow server` on 127.0.0.1 with a fresh Postgres database (the machine's
PostgreSQL, trust auth) and a local artifact directory served through the server
(``--artifacts-destination``), as the Kubernetes deployment in ``infra/`` runs it.
Everything is checked through the REST client: runs, registered models, aliases, artifacts.

The DAG runs once (``server_dag``), every stage a subprocess, and is checked; then the same DAG runs
with every stage in the step image against the same server and must register the same scores. Both
checks are one test, so one subprocess run serves both on one pytest worker. (As two tests in an
``xdist_group`` each was set up on its own worker: pytest-xdist 3.8's loadgroup renames
``item._nodeid``, which pytest 9.2 no longer reads, so the suite ran the subprocess DAG twice.)
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from frugalrl.cli import main
from frugalrl.ops.images import daemon_available
from frugalrl.tracking import git_dirty

from .conftest import IN_CI, needs_postgres, running_mlflow_server

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
    first: dict  # registered policy name -> the version this run registered


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
        client = MlflowClient(tracking_uri=url)
        yield DagRun(url, printed.getvalue(), tmp, {name: _newest(client, name) for name in POLICIES})


def _newest(client, name):  # noqa: ANN001, ANN202
    return max(client.search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))


@pytest.mark.slow
@needs_postgres
def test_the_production_dag_on_a_postgres_mlflow_server_then_in_containers(
    server_dag, tmp_path, request, monkeypatch, capsys
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_dag.url)
    _check_the_subprocess_run(server_dag, tmp_path)
    if not IN_CI and not daemon_available():
        pytest.skip(
            "the subprocess DAG's checks passed; the container half needs a Docker daemon (start dockerd; .ci/run does)"
        )
    _check_the_container_run(server_dag, request, monkeypatch, capsys)


def _check_the_subprocess_run(server_dag: DagRun, tmp_path: Path) -> None:
    mlflow_server, out = server_dag.url, server_dag.out
    assert "19 of 19 stages" in out and "FAILED" not in out and "(isolated:" in out
    assert f"MLflow UI: open {mlflow_server}" in out
    report = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: "))
    page = Path(report).read_text()
    assert "promot" in page.lower() and "<h3>PEFT comparison</h3>" in page  # a declared artifact: it arrived
    assert [p.name for p in Path(report).parents[1].glob("peft-compare/*")] != [] and not list(
        Path(report).parents[1].glob("peft-compare/peft")
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
    assert [a.path for a in client.list_artifacts(run.info.run_id, "report")] == ["report/html"]
    trials = client.search_runs([run.info.experiment_id], "tags.mlflow.parentRunId != ''")
    assert len(trials) >= 2  # one nested MLflow run per Optuna trial
    from frugalrl.policy_store import load_policy

    assert load_policy("models:/pendulum-policy-adapted@challenger").spec["env"]["id"] == "InvertedPendulum-v5"
    if not git_dirty():  # the audit re-runs committed code only
        from frugalrl.ops.audit import audit

        result = audit(champion.run_id, keep=tmp_path / "audit")
        assert result["reproduced"], result["differences"]


def _check_the_container_run(
    server_dag: DagRun,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same DAG, every stage in the step image, against the same server: the same figures."""
    step_image = request.getfixturevalue("step_image")  # asked for here: without a daemon it cannot be built
    request.getfixturevalue("records")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_dag.url)
    monkeypatch.setenv("OPTUNA_STORAGE", f"sqlite:///{server_dag.tmp / 'docker' / 'optuna.db'}")
    profile = server_dag.tmp / "ci.yaml"
    capsys.readouterr()  # only what the container run prints
    main(["pipeline", "run", "--profile", str(profile), "--root", str(server_dag.tmp / "docker"), "--runner", "docker"])
    out = capsys.readouterr().out
    assert "19 of 19 stages" in out and f"(in containers of {step_image.tag})" in out
    client = MlflowClient(server_dag.url)
    for name, reference_version in server_dag.first.items():
        version = _newest(client, name)
        assert int(version.version) == int(reference_version.version) + 1, name
        tags, reference = version.tags, reference_version.tags
        # the same figures at the same seeds, from the same package versions on the same CPU (config hashes
        # differ: each run pins the evaluator or encoder version that its own pretraining registered)
        assert "frugalrl.eval_returns" in reference, name
        for key in ("frugalrl.score", "frugalrl.eval_returns", "frugalrl.eval_seed"):
            assert tags.get(key) == reference.get(key), (name, key)
        run = client.get_run(version.run_id)
        assert run.data.tags["frugalrl.image_digest"] == step_image.image_id
        assert run.data.tags["frugalrl.image"] == step_image.tag
        assert run.data.tags["frugalrl.git_commit"] == step_image.git_commit
    # what the containers wrote, the caller can remove
    shutil.rmtree(server_dag.tmp / "docker")
