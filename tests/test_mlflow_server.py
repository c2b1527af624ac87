"""A real MLflow tracking server on PostgreSQL: the pipeline runs against it end to end.

The server is `mlflow server` on 127.0.0.1 with a fresh Postgres database (the machine's
PostgreSQL, trust auth) and a local artifact directory served through the server
(``--artifacts-destination``), as the Kubernetes deployment in ``infra/`` runs it.
Everything is checked through the REST client: runs, registered models, aliases, artifacts.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from mlflow import MlflowClient

from frugalrl.cli import main

from .conftest import REPO

PG = "postgresql+psycopg://postgres@127.0.0.1:5432"


def _postgres_up() -> bool:
    return (
        shutil.which("pg_isready") is not None
        and subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    database = f"mlflow_{uuid.uuid4().hex[:10]}"
    _admin(f"CREATE DATABASE {database}")
    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"{PG}/{database}", "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                    break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    tail = (tmp_path / "server.log").read_text()[-800:]
                    raise RuntimeError(f"mlflow server did not start: {tail}") from None
                time.sleep(1)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        _admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


@pytest.mark.skipif(not _postgres_up(), reason="PostgreSQL is not running on 127.0.0.1")
def test_pipeline_against_mlflow_server_on_postgres(mlflow_server, tmp_path, capsys):
    overrides = ["ppo.total_timesteps=1024", "ppo.update_epochs=2", "eval.episodes=5", "name=server-test"]
    args = ["pipeline", "run", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "--root", str(tmp_path / "root")]
    main([*args, *[a for o in overrides for a in ("--set", o)]])
    out = capsys.readouterr().out
    assert "registered cartpole-policy version 1" in out and mlflow_server in out

    client = MlflowClient(tracking_uri=mlflow_server)
    champion = client.get_model_version_by_alias("cartpole-policy", "champion")
    assert str(champion.version) == "1"
    assert client.get_model_version_by_alias("cartpole-policy", "challenger").version == champion.version
    run = client.get_run(champion.run_id)
    assert run.data.params["ppo.total_timesteps"] == "1024"
    assert run.data.metrics["eval_episodes"] == 5
    assert run.data.tags["frugalrl.pipeline_run_id"] not in ("", "none")
    assert "frugalrl.pkg.torch" in run.data.tags
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/summary.json", "run/config.yaml", "run/policy.pt"} <= artifacts
    local = client.download_artifacts(run.info.run_id, "run/summary.json", str(tmp_path))
    assert os.path.getsize(local) > 100
    from frugalrl.policy_store import load_policy

    assert load_policy("models:/cartpole-policy@champion").spec["env"]["id"] == "CartPole-v1"
