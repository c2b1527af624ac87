"""MLflow tracking on a real sqlite store: params, metrics, lineage tags, model, clear errors."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import mlflow
import pytest
from mlflow import MlflowClient

from frugalrl.config import flatten
from frugalrl.errors import TrackingError
from frugalrl.policy_store import load_policy
from frugalrl.tracking import check_tracking, promote_if_better, register_model, tracking_uri
from frugalrl.training import train

from .conftest import REPO, needs_postgres, tiny_config


def test_run_logs_params_metrics_tags_and_model(tmp_path):
    config = tiny_config(tracking={"enabled": True, "experiment": "t"})
    summary = train(config, tmp_path / "run", interactive=False)
    run = MlflowClient().get_run(summary["mlflow_run_id"])
    params = run.data.params
    assert params["ppo.learning_rate"] == str(config.ppo.learning_rate)
    assert set(params) == set(flatten(config.to_dict()))
    tags = run.data.tags
    assert tags["frugalrl.config_hash"] == config.hash()
    assert tags["frugalrl.seed"] == "3"
    assert tags["frugalrl.git_commit"]  # a commit hash, or "unknown" outside git
    assert tags["frugalrl.version"]
    metrics = run.data.metrics
    assert metrics["eval_mean"] == pytest.approx(summary["eval_mean"])
    assert metrics["real_env_steps"] == summary["real_env_steps"]
    history = MlflowClient().get_metric_history(run.info.run_id, "policy_loss")
    assert len(history) == 8  # one per update
    assert len(MlflowClient().get_metric_history(run.info.run_id, "cpu_s")) == 8  # in the updates and the summary
    for key in metrics:  # each metric once per step
        steps = [m.step for m in MlflowClient().get_metric_history(run.info.run_id, key)]
        assert len(steps) == len(set(steps)), (key, steps)
    artifacts = {a.path for a in MlflowClient().list_artifacts(run.info.run_id, "run")}
    assert {"run/summary.json", "run/config.yaml", "run/checkpoint.pt", "run/policy.pt"} <= artifacts
    policy = load_policy(summary["model_uri"])
    assert policy.spec["env"]["id"] == "CartPole-v1"


def test_registry_aliases_challenger_and_champion(tmp_path):
    mlflow.set_tracking_uri(check_tracking())
    config = tiny_config(tracking={"enabled": True})
    summary = train(config, tmp_path / "run", interactive=False)
    name = "tiny-policy"
    v1 = register_model(summary["model_uri"], name, summary["mlflow_run_id"], 50.0, "eval_mean")
    assert promote_if_better(name, v1, 50.0)["promoted"] is True  # first model becomes champion
    v2 = register_model(summary["model_uri"], name, summary["mlflow_run_id"], 40.0, "eval_mean")
    decision = promote_if_better(name, v2, 40.0)
    client = MlflowClient()
    assert decision["promoted"] is False
    assert str(client.get_model_version_by_alias(name, "champion").version) == v1
    assert str(client.get_model_version_by_alias(name, "challenger").version) == v2
    v3 = register_model(summary["model_uri"], name, summary["mlflow_run_id"], 60.0, "eval_mean")
    assert promote_if_better(name, v3, 60.0)["promoted"] is True
    assert str(client.get_model_version_by_alias(name, "champion").version) == v3
    assert load_policy(f"models:/{name}@champion").spec["env"]["id"] == "CartPole-v1"


@pytest.mark.slow
def test_unreachable_server_fails_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    with pytest.raises(TrackingError, match="unreachable"):
        check_tracking()
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "frugalrl.cli", "train", str(REPO / "configs/cartpole-ppo.yaml"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: MLflow server http://127.0.0.1:9 is unreachable")
    assert "MLFLOW_TRACKING_URI" in last
    assert not (out / "checkpoint.pt").exists() and not (out / "metrics.jsonl").exists()


@pytest.mark.parametrize("where", ["127.0.0.1:9", "silent"])
def test_a_database_store_that_does_not_answer_is_one_line_within_the_timeout(where, monkeypatch):
    """Not MLflow's two minutes of connection retries: one connection, bounded by the timeout, the password
    hidden; whether nothing listens (refused) or something accepts and never answers (a proxy, a hung server)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host = f"127.0.0.1:{silent.getsockname()[1]}" if where == "silent" else where
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"postgresql+psycopg://probe:PW@{host}/mlflow")
        started = time.monotonic()
        with pytest.raises(TrackingError) as caught:
            check_tracking(timeout_s=2)
    message = str(caught.value)
    assert time.monotonic() - started < 30, message
    assert "does not answer" in message and "PW" not in message and "probe:***@" in message, message


@needs_postgres
def test_a_database_store_that_answers_passes_the_check(monkeypatch):
    uri = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert check_tracking(timeout_s=2) == uri


def test_sqlite_store_in_missing_folder_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/no/such/dir/mlflow.db")
    with pytest.raises(TrackingError, match="missing or not writable"):
        check_tracking()


def test_a_pod_refuses_a_tracking_store_that_would_vanish_with_it(tmp_path, monkeypatch):
    """In a KFP step (``KFP_POD_NAME``) a missing or local MLFLOW_TRACKING_URI is one line naming the Secret
    to create (``FRUGALRL_TRACKING_SECRET``, set by the compiled pipeline); a server's URI is used as given."""
    monkeypatch.setenv("KFP_POD_NAME", "frugalrl-train-abc-123")
    monkeypatch.setenv("FRUGALRL_TRACKING_SECRET", "team-mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(TrackingError) as missing:
        tracking_uri()
    message = str(missing.value)
    assert "MLFLOW_TRACKING_URI is not set" in message and "create the Secret team-mlflow" in message
    assert "\n" not in message
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(TrackingError, match="a store on the pod's disk, which is lost with the pod; create the Secret "
                       "team-mlflow"):  # fmt: skip
        tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert tracking_uri() == "http://mlflow:5000"
    # without the pipeline's variable the default Secret is named
    monkeypatch.delenv("FRUGALRL_TRACKING_SECRET")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "./mlruns")
    with pytest.raises(TrackingError, match="create the Secret frugalrl-tracking"):
        tracking_uri()
    # any other pod (a notebook server with a persistent disk) has only the kubelet's address: it may keep a
    # local store, so KUBERNETES_SERVICE_HOST alone is not a pipeline step
    monkeypatch.delenv("KFP_POD_NAME")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert tracking_uri() == "./mlruns"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert tracking_uri() == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"  # the working directory's
    # off a cluster the local store is the default, as before
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert tracking_uri() == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"


def test_lineage_names_pretrained_inputs_by_their_mlflow_uri(tmp_path):
    import json

    from frugalrl.tracking import lineage_tags, pretrained_inputs

    encoder_dir = tmp_path / "encoder"
    encoder_dir.mkdir()
    (encoder_dir / "summary.json").write_text(json.dumps({"model_uri": "models:/m-abc123"}))
    config = tiny_config(
        selection={"kind": "pivot", "settings": {"evaluator_from": "models:/cartpole-evaluator@champion"}}
    )
    assert pretrained_inputs(config) == {"frugalrl.lineage.evaluator": "models:/cartpole-evaluator@champion"}
    from frugalrl.config import load_config

    latent = load_config(REPO / "configs/breakout-latent.yaml", [f"latent.encoder_from={encoder_dir}"])
    tags = lineage_tags(latent)
    assert tags["frugalrl.lineage.encoder"] == "models:/m-abc123"  # the pipeline artifact, named by its model
    assert tags["frugalrl.pkg.torch"] and tags["frugalrl.git_dirty"] in ("true", "false")


def test_metrics_are_sent_in_batches_and_none_is_lost(tmp_path, monkeypatch):
    """Per-update metrics are queued and sent in batches; the run's history still has every step."""
    from mlflow import MlflowClient

    from frugalrl.tracking import runs as runs_module

    calls = []
    original = MlflowClient.log_batch

    def counted(self, *args, **kwargs):
        if kwargs.get("metrics"):
            calls.append(len(kwargs["metrics"]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", counted)
    monkeypatch.setattr(runs_module, "FLUSH_SECONDS", 3600.0)
    config = tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 2048}, checkpoint={"every_updates": 8})
    summary = train(config, tmp_path / "run", interactive=False)  # 16 updates, a checkpoint after the 8th and 16th
    history = MlflowClient().get_metric_history(summary["mlflow_run_id"], "policy_loss")
    assert [m.step for m in history] == [128 * (i + 1) for i in range(16)]
    # one send per checkpoint (MLflow then holds what a resume will not redo) and one with the summary:
    # not one per update
    assert len(calls) == 3 and sum(calls) > 16, calls


def test_a_tracking_uri_with_credentials_reaches_the_server_and_is_never_printed(capsys):
    """``http://user:PASSWORD@host`` works (urllib cannot open it: the health check sends Basic auth to the host),
    and an error about such a store shows ``***`` where the password was."""
    import base64
    import http.server
    import threading

    seen: list[str | None] = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://probe:S3cret%21@127.0.0.1:{server.server_port}"
        assert check_tracking(uri) == uri
        assert seen == ["Basic " + base64.b64encode(b"probe:S3cret!").decode()]
    finally:
        server.shutdown()
    with pytest.raises(TrackingError) as error:  # the same URI where nothing answers any more
        check_tracking(f"http://probe:S3cret%21@127.0.0.1:{server.server_port}", timeout_s=1)
    message = str(error.value)
    assert "S3cret" not in message and "probe:***@" in message and "\n" not in message


def test_an_unusable_optuna_storage_is_named_without_its_password(tmp_path, monkeypatch):
    from frugalrl.errors import ConfigError
    from frugalrl.tuning import storage_for

    monkeypatch.setenv("OPTUNA_STORAGE", "postgresql+psycopg://probe:S3cret@127.0.0.1:9/optuna?password=Other")
    with pytest.raises(ConfigError) as error:
        storage_for(tiny_config(tuning={"trials": 2}), tmp_path)
    message = str(error.value)
    assert "S3cret" not in message and "Other" not in message and "probe:***@127.0.0.1:9" in message
