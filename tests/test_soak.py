"""A team's afternoon in two minutes: four trainings and two tuning workers at once against one
MLflow server on PostgreSQL, while the server is restarted twice and PostgreSQL once.

Every run must finish, every metric of every run must be in MLflow exactly once (checked against
the run's own ``metrics.jsonl``), and the study must hold exactly its trials, none lost, none
doubled, each logged once as an MLflow run. Loopback only. PostgreSQL is a cluster of the test's own
(``pg_createcluster`` on a free port, dropped afterwards), so restarting it disturbs no other test and
this one runs beside the rest; making and restarting a cluster needs root and Debian's
postgresql-common: CI has both; elsewhere the test skips, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from .conftest import IN_CI, REPO, _free_port, tiny_config

TRAININGS = 4
TUNE_WORKERS = 2
TRIALS = 4
UP_FOR_UPDATES = 10  # after the server is back, every run goes on this long (more than one 10 s flush)


def _can_make_a_cluster() -> str | None:
    """Why a PostgreSQL cluster of the test's own cannot be made and restarted from here, or None."""
    if shutil.which("pg_createcluster") is None or not Path("/etc/postgresql").is_dir():
        return "pg_createcluster is not installed (Debian's postgresql-common)"
    if os.geteuid() != 0:
        return "making and restarting a PostgreSQL cluster needs root"
    return None


class Cluster:
    """A PostgreSQL cluster of this test's own, trust auth on 127.0.0.1 and a free port."""

    def __init__(self) -> None:
        self.version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
        self.name, self.port = f"frugalrl_soak_{uuid.uuid4().hex[:8]}", _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def __enter__(self) -> Cluster:
        subprocess.run(["pg_createcluster", self.version, self.name, "-p", str(self.port), "--start", "--",
                        "--auth-host=trust", "--auth-local=trust"], check=True, capture_output=True,
                       timeout=120)  # fmt: skip
        self._ready()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            for database in ("mlflow", "optuna"):  # each its own tables (both keep an alembic_version)
                conn.execute(f"CREATE DATABASE {database}")
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["pg_dropcluster", "--stop", self.version, self.name], capture_output=True, timeout=120)

    def _ready(self) -> None:
        for _ in range(240):
            if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-q"]).returncode == 0:
                return
            time.sleep(0.25)
        raise RuntimeError(f"PostgreSQL cluster {self.name} did not come up")

    def restart(self) -> None:
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "restart"],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        self._ready()


class Server:
    """``mlflow server`` on one Postgres database and one port, restartable (SIGKILL, then start again)."""

    def __init__(self, tmp_path: Path, database: str) -> None:
        self.port, self.tmp_path, self.database = _free_port(), tmp_path, database  # database: a full URL
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = (self.tmp_path / "server.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "2", "--backend-store-uri", self.database,
             "--artifacts-destination", str(self.tmp_path / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(f"{self.url}/health", timeout=2).status == 200:
                    return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"mlflow server did not start: {self.tmp_path / 'server.log'}") from None
                time.sleep(0.25)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def _launch(log: Path, env: dict, *args: str) -> subprocess.Popen:
    """``frugalrl ARGS`` with its stderr in ``log`` (``proc.log``): a file, never a pipe that could fill."""
    with log.open("w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "frugalrl", *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=handle, text=True)  # fmt: skip
    proc.log = log
    return proc


def _lines(out: Path) -> int:
    path = out / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _each_run_moved_on(outs: list[Path], updates: int):
    """A condition: every run has done ``updates`` more updates than now, or has finished."""
    base = {out: _lines(out) for out in outs}
    return lambda: all(_lines(o) >= base[o] + updates or (o / "summary.json").exists() for o in outs)


def _wait_until(predicate, procs, timeout: float) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("the runs did not get there in time")
        if any(p.poll() not in (None, 0) for p in procs):
            failed = next(p for p in procs if p.poll() not in (None, 0))
            raise AssertionError(f"a process failed: {failed.args[-8:]}: {failed.log.read_text()[-1500:]}")
        time.sleep(0.2)


@pytest.mark.slow
def test_many_runs_and_tuning_survive_server_and_database_restarts(tmp_path):
    reason = _can_make_a_cluster()
    if reason:
        if IN_CI:
            pytest.fail(f"CI runs as root on Debian: {reason}")
        pytest.skip(reason)
    with Cluster() as postgres:
        _soak(tmp_path, postgres)


def _soak(tmp_path: Path, postgres: Cluster) -> None:
    from mlflow import MlflowClient

    server = Server(tmp_path, f"{postgres.url}/mlflow")
    server.start()
    study = f"soak-{uuid.uuid4().hex[:8]}"
    optuna_storage = f"postgresql://postgres@127.0.0.1:{postgres.port}/optuna"
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url, "OPTUNA_STORAGE": optuna_storage}
    # each training 64 updates (the last restart comes after about 24), a checkpoint every 5; the trials small
    config = tmp_path / "train.yaml"
    config.write_text(json.dumps(tiny_config(
        ppo={"total_timesteps": 8192}, checkpoint={"every_updates": 5}, eval={"episodes": 2},
        tracking={"enabled": True, "experiment": "soak", "timeout_s": 10, "retries": 1, "reconnect_s": 2},
    ).to_dict()))  # fmt: skip
    outs = [tmp_path / f"run-{i}" for i in range(TRAININGS)]
    procs = [_launch(tmp_path / f"run-{i}.log", env, "train", str(config), "--out", str(out))
             for i, out in enumerate(outs)]  # fmt: skip
    tune_sets = ["ppo.total_timesteps=2048", "ppo.num_steps=32", "eval.episodes=2", "tuning.report_every_updates=1",
                 f"tuning.trials={TRIALS}", "tuning.round_size=2", f"tuning.study_name={study}",
                 "tracking.experiment=soak-tune", "tracking.timeout_s=10", "tracking.retries=1",
                 "tracking.reconnect_s=2"]  # fmt: skip
    sets = [a for s in tune_sets for a in ("--set", s)]
    tuners = [_launch(tmp_path / f"tune-{w}.log", env, "tune", "-c", str(REPO / "configs/cartpole-tune.yaml"),
                      "-o", str(tmp_path / f"tune-{w}"), "--worker", str(w), *sets)
              for w in range(TUNE_WORKERS)]  # fmt: skip
    everyone = procs + tuners
    restarts: list[str] = []
    began = time.monotonic()
    try:
        _wait_until(lambda: all(_lines(o) >= 4 for o in outs), everyone, 120)
        server.kill()
        server.start()
        restarts.append("mlflow")
        _wait_until(_each_run_moved_on(outs, UP_FOR_UPDATES), everyone, 120)  # time to come back, store up
        postgres.restart()
        restarts.append("postgres")
        _wait_until(_each_run_moved_on(outs, UP_FOR_UPDATES), everyone, 120)
        server.kill()
        server.start()
        restarts.append("mlflow")
        for proc in everyone:
            assert proc.wait(timeout=300) == 0, proc.log.read_text()[-2000:]
        errors = [proc.log.read_text() for proc in everyone]
        took = time.monotonic() - began

        # a run that ended while the server was away kept the rest in its directory: `frugalrl sync` sends it
        late = [d for d in [*outs, *(tmp_path / f"tune-{w}" for w in range(TUNE_WORKERS))]
                if (d / "mlflow_offline.jsonl").exists()]  # fmt: skip
        for directory in late:
            synced = subprocess.run([sys.executable, "-m", "frugalrl", "sync", str(directory)], env=env,
                                    capture_output=True, text=True, timeout=300)  # fmt: skip
            assert synced.returncode == 0, synced.stderr[-1500:]
        client = MlflowClient(tracking_uri=server.url)
        checked = 0
        for out in outs:
            summary = json.loads((out / "summary.json").read_text())
            assert not (out / "mlflow_offline.jsonl").exists(), f"{out}: tracking still waiting to be sent"
            run = client.get_run(summary["mlflow_run_id"])
            assert run.info.status == "FINISHED" and summary["model_uri"]
            rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
            for key in ("policy_loss", "value_loss", "sps"):
                steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
                expected = [row["step"] for row in rows if key in row]
                assert sorted(steps) == sorted(expected), (out, key)  # each once: none lost, none doubled
                checked += len(steps)
        import optuna

        from frugalrl.tuning_rounds import counted

        trials = counted(optuna.load_study(study_name=study, storage=optuna_storage).get_trials())
        assert sorted(t.number for t in trials) == list(range(TRIALS))
        assert all(t.state.is_finished() and t.state.name != "FAIL" for t in trials)
        logged = client.search_runs(
            [client.get_experiment_by_name("soak-tune").experiment_id], f"tags.`frugalrl.trial` LIKE '{study}/%'"
        )  # fmt: skip
        # one MLflow run per trial, its parameters as the study holds them (else: what the workers said)
        said = [proc.log.read_text()[-1500:] for proc in tuners]
        assert sorted(r.data.tags["frugalrl.trial"] for r in logged) == [f"{study}/{t.number}" for t in trials], said
        by_number = {int(r.data.tags["frugalrl.trial"].split("/")[-1]): r for r in logged}
        assert all(by_number[t.number].data.params == {k: str(v) for k, v in t.params.items()} for t in trials)
        reconnected = sum("answers again" in (text or "") for text in errors)
        print(f"soak: {TRAININGS} trainings + {TUNE_WORKERS} tuning workers, restarts {restarts}, "
              f"{checked} metric values checked, {TRIALS} trials, lost 0, doubled 0, {reconnected} processes "
              f"reconnected by themselves, {len(late)} sent the rest with `frugalrl sync`, {took:.0f} s")  # fmt: skip
    finally:
        for proc in everyone:
            if proc.poll() is None:
                proc.kill()
        server.kill()
