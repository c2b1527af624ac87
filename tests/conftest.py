"""Shared fixtures: a private MLflow sqlite store per test, tiny configs, NaN-reward env."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from frugalrl.config import ExperimentConfig, validate_config
from frugalrl.ops.images import ImageRecord, load_record
from frugalrl.tracking.store import IN_CLUSTER_ENV

REPO = Path(__file__).resolve().parents[1]
# Pinned fakes (a registry host and a digest) for compiling to a cluster: nothing pulls them
CPU_IMAGE = "registry.example.com/frugalrl@sha256:" + "a" * 64
CUDA_IMAGE = "registry.example.com/frugalrl-cuda@sha256:" + "b" * 64


class NaNRewardEnv(gym.Env):
    """A tiny env whose reward turns NaN after a few steps: drives the divergence guard."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, nan_after: int = 40):
        self.nan_after = nan_after
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float("nan") if self.t > self.nan_after else 1.0
        return np.zeros(2, np.float32), reward, False, self.t % 20 == 0, {}


gym.register("FrugalTest/NaNReward-v0", entry_point=NaNRewardEnv)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Each test gets its own MLflow store and working directory; one torch thread. Off any cluster, even when
    the suite itself runs in a pod (a CI runner on Kubernetes): there a local store would be refused."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    for name in IN_CLUSTER_ENV:
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(1)


def tiny_config(**sections) -> ExperimentConfig:
    """CartPole with a budget of a few updates; ``sections`` override top-level keys."""
    data = {
        "name": "tiny",
        "seed": 3,
        "env": {"id": "CartPole-v1", "num_envs": 4},
        "ppo": {"total_timesteps": 1024, "num_steps": 32, "batch_size": 64, "update_epochs": 2},
        "eval": {"episodes": 4},
        "checkpoint": {"every_updates": 2},
        "tracking": {"enabled": False},
    }
    if sections.get("algo", "ppo") != "ppo" and "ppo" not in sections:
        del data["ppo"]  # another algorithm's settings would be refused as ignored
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return validate_config(data, source="tiny")


IN_CI = bool(os.environ.get("FRUGALRL_CI"))  # set by .ci/run: there a test that needs a service must not skip


def postgres_up() -> bool:
    return (
        shutil.which("pg_isready") is not None
        and subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0
    )


# A Postgres-backed test: skipped with the reason on a machine without PostgreSQL, never in CI
# (there it runs and fails, loudly, if PostgreSQL is down).
needs_postgres = pytest.mark.skipif(
    not IN_CI and not postgres_up(), reason="PostgreSQL is not running on 127.0.0.1 (in CI this test fails instead)"
)


# A real MLflow tracking server on PostgreSQL (the machine's, trust auth), one database per test.
PG = "postgresql+psycopg://postgres@127.0.0.1:5432"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(sql)


def wait_until_up(url: str, exited: Callable[[], bool], log: Callable[[], str], what: str,
                  timeout_s: float = 120) -> None:  # fmt: skip
    """Until ``url`` answers 200: a RuntimeError with the log's tail if the process exits or time runs out."""
    deadline = time.time() + timeout_s
    while True:
        try:
            if urllib.request.urlopen(url, timeout=2).status == 200:
                return
        except OSError:
            if exited() or time.time() > deadline:
                raise RuntimeError(f"{what} did not start: {log()[-800:]}") from None
            time.sleep(0.5)


@contextlib.contextmanager
def running_mlflow_server(tmp_path: Path) -> Iterator[str]:
    """``mlflow server`` on a fresh Postgres database, serving artifacts from ``tmp_path``; yields its URL."""
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
        wait_until_up(f"{url}/health", lambda: server.poll() is not None,
                      lambda: (tmp_path / "server.log").read_text(), "mlflow server")  # fmt: skip
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        _admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    with running_mlflow_server(tmp_path) as url:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        yield url


# The step image, for the tests that run it (test_containers.py, test_mlflow_server.py).
BASE = "frugalrl-base:bookworm"


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()


def _current(record: ImageRecord | None) -> bool:
    import docker

    if record is None or record.git_commit != _head() or record.git_dirty:
        return False
    try:
        docker.from_env().images.get(record.image_id)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.fixture(scope="session")
def step_image(tmp_path_factory) -> ImageRecord:
    """The CPU image of this checkout: the recorded build when it is of this commit, else a new build."""
    record = load_record(REPO, "cpu")
    if not _current(record):
        from frugalrl.ops.images import build_image

        base = (
            BASE if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode == 0 else None
        )
        record = build_image(REPO, "cpu", base, progress=lambda line: None)
    return record


@pytest.fixture
def records(step_image, tmp_path, monkeypatch) -> Path:
    """A private copy of the image record: pushes in a test do not touch the checkout's."""
    where = tmp_path / "records"
    where.mkdir()
    (where / "image-cpu.json").write_text((REPO / ".frugalrl" / "image-cpu.json").read_text())
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(where))
    return where


@pytest.fixture
def registry(tmp_path) -> str:
    """Debian's container registry (``docker-registry``) on 127.0.0.1, storing under ``tmp_path``."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed (apt-get install -y docker-registry; .ci/run does)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "registry")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }))  # fmt: skip
    log = (tmp_path / "registry.log").open("w")
    server = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v2/", lambda: server.poll() is not None,
                      lambda: (tmp_path / "registry.log").read_text(), "docker-registry", timeout_s=30)  # fmt: skip
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture
def forget_credentials():
    """What a test's configs remembered (``frugalrl.credentials``) stays out of the next test's environment."""
    from frugalrl.credentials import ENV_PREFIX

    yield
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        del os.environ[name]


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``secret`` (databases, artifacts, checkpoints, logs),
    but the user's own inputs (``root/inputs``)."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_relative_to(root / "inputs")]
    return [str(p.relative_to(root)) for p in files if secret.encode() in p.read_bytes()]


# The longest test files start first. With two workers taking tests in collection order, a five-minute test
# collected late ends the suite minutes after the other worker ran dry; started first, the rest fills in
# beside it. Measured per test in .ci/run's --durations list (docs/benchmarks.md, "The suite and the demo").
LONGEST_FIRST = (
    "test_cluster_execution.py",  # about 5.5 min
    "test_soak.py",  # about 2 min
    "test_plain_mlflow.py",
    "test_mlflow_server.py",
    "test_packaging.py",
    "test_custom_env.py",
    "test_pipeline.py",
    "test_credentials.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: within a file, the file's order
