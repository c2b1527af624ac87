"""Faults during a run: a tracking server that dies, a process killed mid-run, Ctrl-C.

Each test makes the fault happen for real (a killed ``mlflow server``, SIGKILL, SIGINT) and
checks what the user is left with: one line saying what happened, nothing lost, nothing doubled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from frugalrl.cli import main
from frugalrl.training import train

from .conftest import IN_CI, tiny_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(tmp_path: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` on a sqlite file in ``tmp_path`` (the same store across restarts)."""
    log = (tmp_path / "server.log").open("a")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.time() + 120
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return server
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                tail = (tmp_path / "server.log").read_text()[-800:]
                raise RuntimeError(f"mlflow server did not start: {tail}") from None
            time.sleep(0.5)


def _kill(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGKILL)  # the whole server: gunicorn/uvicorn and its workers
    server.wait(timeout=30)


def _client() -> MlflowClient:
    """The store this test's runs write to (another test may have left mlflow's global URI elsewhere)."""
    return MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])


def _metric_steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _sync_killed_after_each_entry_in_turn(out: Path, monkeypatch) -> int:
    """``frugalrl sync OUT`` killed (Ctrl-C) right after it sent an entry and before marking it sent, for
    each entry in turn: every sync after the first sends the entry the last one died on again, marks it,
    sends the next and dies; the last one finishes. Returns how many syncs were cut short."""
    from frugalrl.tracking import offline

    mark = offline._moved
    cuts, marks_left = 0, [0]

    def killed_before_marking(run_dir, sent, left) -> None:  # noqa: ANN001 - offline._moved's arguments
        if not marks_left[0]:
            raise KeyboardInterrupt
        marks_left[0] -= 1
        mark(run_dir, sent, left)

    monkeypatch.setattr(offline, "_moved", killed_before_marking)
    while True:
        marks_left[0] = 1 if cuts else 0
        try:
            main(["sync", str(out)])
        except SystemExit as stopped:
            assert stopped.code == 130, stopped.code
            cuts += 1
            continue
        monkeypatch.setattr(offline, "_moved", mark)
        return cuts


@pytest.mark.slow
def test_a_tracking_server_that_dies_mid_run_loses_nothing(tmp_path, monkeypatch, capsys):
    """The server is killed after the 3rd update: training finishes, one line says so, and
    ``frugalrl sync`` (with the server back) puts every metric, artifact and the model into MLflow, each
    once, even when every entry's sync is killed after sending it and before marking it sent."""
    from frugalrl.tracking import offline, runs

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    monkeypatch.setattr(runs, "FLUSH_SECONDS", 0.0)  # every update is sent at once: the failure shows at once
    server = _start_server(tmp_path, port)
    killed: list[int] = []

    def kill_at_third(learner, metrics) -> None:
        if learner.update == 3 and not killed:
            _kill(server)
            killed.append(learner.update)

    config = tiny_config(tracking={"enabled": True, "timeout_s": 2, "retries": 0}, ppo={"total_timesteps": 2048})
    out = tmp_path / "run"
    started = time.monotonic()
    try:
        summary = train(config, out, interactive=False, on_update=kill_at_third)
    finally:
        if server.poll() is None:
            _kill(server)
    assert killed == [3] and time.monotonic() - started < 120  # no minutes of retries
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "stopped answering" in line]
    assert len(warnings) == 1 and f"frugalrl sync {out}" in warnings[0], err
    assert summary["eval_mean"] > 0 and summary["model_uri"] is None and (out / "mlflow_offline.jsonl").is_file()

    server = _start_server(tmp_path, port)
    try:
        waiting = len(offline.pending(out))
        assert _sync_killed_after_each_entry_in_turn(out, monkeypatch) == waiting  # then one sync that finished
        line = capsys.readouterr().out.strip().splitlines()[-1]
        assert line.startswith(f"synced {out} to MLflow run {summary['mlflow_run_id']}"), line
        client = MlflowClient(tracking_uri=url)
        run = client.get_run(summary["mlflow_run_id"])
        updates = [json.loads(row)["update"] for row in (out / "metrics.jsonl").read_text().splitlines()]
        steps = _metric_steps(client, run.info.run_id, "policy_loss")
        assert len(steps) == len(updates) == len(set(steps))  # every update once: none lost, none twice
        mlflow.set_tracking_uri(url)
        models = mlflow.search_logged_models([run.info.experiment_id], f"source_run_id = '{run.info.run_id}'",
                                             output_format="list")  # fmt: skip
        assert [m.name for m in models] == ["policy"]  # sent twice by the cut syncs, logged once
        assert run.info.status == "FINISHED" and run.data.metrics["eval_mean"] == summary["eval_mean"]
        assert "run/summary.json" in [a.path for a in client.list_artifacts(run.info.run_id, "run")]
        synced = json.loads((out / "summary.json").read_text())["model_uri"]
        assert synced.startswith("models:/")  # the policy model, logged late from policy.pt
        assert not (out / "mlflow_offline.jsonl").exists() and (out / "mlflow_offline.synced.jsonl").is_file()
        main(["sync", str(out)])  # again: nothing waits, nothing is sent twice
        assert "nothing was waiting" in capsys.readouterr().out
        assert len(_metric_steps(client, run.info.run_id, "policy_loss")) == len(updates)
    finally:
        _kill(server)


def _train_process(config_path: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "frugalrl", "train", str(config_path), "--out", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a shell that starts CI in the background ignores SIGINT for its children; a terminal does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def _wait_for(predicate, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for the run to get there")
        time.sleep(0.05)


def _lines(out: Path) -> int:
    path = out / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


@pytest.fixture
def long_config(tmp_path) -> Path:
    """A tracked CartPole run long enough to be stopped in the middle (checkpoint every 2 updates)."""
    path = tmp_path / "long.yaml"
    data = tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 40_960}).to_dict()
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_sigkill_then_resume_doubles_nothing(tmp_path, long_config):
    """SIGKILL after a few checkpoints, then ``--resume``: metrics.jsonl and MLflow hold each update once."""
    out = tmp_path / "run"
    proc = _train_process(long_config, out)
    _wait_for(lambda: (out / "checkpoint.pt").is_file() and _lines(out) >= 9)
    proc.kill()
    proc.wait(timeout=30)
    before = _lines(out)
    resumed = subprocess.run([sys.executable, "-m", "frugalrl", "train", "--resume", str(out)],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming {out} from update" in resumed.stdout
    updates = [json.loads(row)["update"] for row in (out / "metrics.jsonl").read_text().splitlines()]
    assert updates == list(range(1, len(updates) + 1)) and len(updates) > before  # each update once, in order
    summary = json.loads((out / "summary.json").read_text())
    steps = _metric_steps(_client(), summary["mlflow_run_id"], "policy_loss")
    assert steps == sorted(set(steps)) and len(steps) == len(updates)


@pytest.mark.slow
def test_ctrl_c_names_the_checkpoint_and_the_resume_command(tmp_path):
    config = tmp_path / "endless.yaml"  # far longer than the test waits: the signal always lands mid-run
    config.write_text(json.dumps(tiny_config(ppo={"total_timesteps": 10_000_000}).to_dict()))
    out = tmp_path / "run"
    proc = _train_process(config, out)
    _wait_for(lambda: (out / "checkpoint.pt").is_file() and _lines(out) >= 5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted at update" in lines[0], err
    assert f"{out / 'checkpoint.pt'}" in lines[0] and f"frugalrl train --resume {out}" in lines[0]


def test_a_copied_run_directory_resumes_into_its_own_mlflow_run(tmp_path, capsys):
    import shutil

    config = tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 1024})
    out = tmp_path / "run"
    train(config, out, interactive=False)
    (out / "summary.json").unlink()  # as if it had stopped after its last checkpoint
    shutil.copytree(out, tmp_path / "copy")
    from frugalrl.checkpoint import load_checkpoint

    first_id = load_checkpoint(out / "checkpoint.pt")["mlflow_run_id"]
    summary = train(config, tmp_path / "copy", resume=True, interactive=False)
    assert "is a copy of" in capsys.readouterr().out
    assert summary["mlflow_run_id"] != first_id
    tags = _client().get_run(summary["mlflow_run_id"]).data.tags
    assert tags["frugalrl.copied_from_run_id"] == first_id and tags["frugalrl.copied_from_dir"] == str(out.resolve())


KILL_AT = {  # the phase -> what to replace with a SIGKILL of the process itself
    "evaluation": "frugalrl.rundir.evaluate_policy",
    "model logging": "frugalrl.tracking.runs.RunTracker.log_model",
    "checkpoint write": "frugalrl.checkpoint.atomic_write_bytes",
}


@pytest.mark.slow
@pytest.mark.parametrize("phase", sorted(KILL_AT))
def test_a_run_killed_in_any_phase_resumes_to_one_finished_run(phase, tmp_path):
    """SIGKILL during evaluation, model logging or a checkpoint write (after the first checkpoint), then
    ``--resume``: the run finishes with every update once in metrics.jsonl and in MLflow."""
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 2048}).to_dict()))
    out = tmp_path / "run"
    module, _, name = KILL_AT[phase].rpartition(".")
    owner = module
    if name == "log_model":  # a static method of a class
        owner, _, cls = module.rpartition(".")
    script = f"""
import importlib, os, signal, sys
from frugalrl.cli import main
target = importlib.import_module({owner!r})
if {name!r} == "log_model":
    target = getattr(target, "RunTracker")
calls = []
original = getattr(target, {name!r})
def die(*args, **kwargs):
    calls.append(1)
    path = str(args[0]) if args else ""
    if {phase!r} != "checkpoint write" or (path.endswith("checkpoint.pt") and len(calls) > 3):
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(target, {name!r}, staticmethod(die) if {name!r} == "log_model" else die)
main(["train", {str(config)!r}, "--out", {str(out)!r}])
"""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert (out / "checkpoint.pt").is_file() and not (out / "summary.json").exists()
    resumed = subprocess.run([sys.executable, "-m", "frugalrl", "train", "--resume", str(out)],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    updates = [json.loads(row)["update"] for row in (out / "metrics.jsonl").read_text().splitlines()]
    assert updates == list(range(1, summary["updates"] + 1))
    client = _client()
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED" and summary["model_uri"]
    assert len(_metric_steps(client, run.info.run_id, "policy_loss")) == len(updates)


def test_a_full_disk_is_one_line_and_keeps_the_last_checkpoint(tmp_path, capsys, monkeypatch):
    import errno

    from frugalrl import checkpoint

    original = checkpoint.atomic_write_bytes

    def full_after_first(path, data) -> None:
        if Path(path).name == "checkpoint.pt" and Path(path).exists():
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        original(path, data)

    monkeypatch.setattr(checkpoint, "atomic_write_bytes", full_after_first)
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(tiny_config().to_dict()))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", str(config), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "No space left on device" in err[0], err
    assert f"{out / 'checkpoint.pt'}" in err[0] and "Traceback" not in err[0]
    assert checkpoint.load_checkpoint(out / "checkpoint.pt")["agent"]["update"] == 2  # the first one, whole


@pytest.mark.slow
def test_a_run_resumed_against_another_store_gets_a_new_mlflow_run_naming_the_old(tmp_path, monkeypatch, capsys):
    config = tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 1024})
    out = tmp_path / "run"
    train(config, out, interactive=False)
    (out / "summary.json").unlink()
    from frugalrl.checkpoint import load_checkpoint

    first_id = load_checkpoint(out / "checkpoint.pt")["mlflow_run_id"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'other.db'}")
    summary = train(config, out, resume=True, interactive=False)
    assert f"MLflow run {first_id} is not in" in capsys.readouterr().out
    assert summary["mlflow_run_id"] != first_id
    assert _client().get_run(summary["mlflow_run_id"]).data.tags["frugalrl.resumed_from_run_id"] == first_id


def test_a_start_that_fails_to_reach_the_tracking_server_can_simply_be_run_again(tmp_path, monkeypatch, capsys):
    """Issue 34: the failed start left config.yaml in --out, so the same command was then refused."""
    from frugalrl.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(tiny_config(tracking={"enabled": True, "timeout_s": 1, "retries": 0}).to_dict()))
    out = tmp_path / "run"
    errors = []
    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            main(["train", str(config), "--out", str(out)])
        assert exit_info.value.code == 2
        errors.append(capsys.readouterr().err.strip().splitlines()[-1])
        assert not out.exists()  # nothing left behind: the retry is the same command
    assert errors[0] == errors[1] and "not empty" not in errors[1], errors


@contextlib.contextmanager
def _small_tmpfs(where: Path, size: str):
    """A real filesystem of ``size`` at ``where`` (tmpfs: needs root and a kernel that lets it mount)."""
    where.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    ).returncode == 0  # fmt: skip
    if not mounted:
        reason = "a tmpfs cannot be mounted here (not root, or no mount); the simulated ENOSPC test covers the path"
        if IN_CI:
            pytest.fail(f"CI runs as root: {reason}")
        pytest.skip(reason)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_really_full_filesystem_is_one_line_and_keeps_the_last_checkpoint(tmp_path, capsys):
    """On a 256 KiB tmpfs the first checkpoint (about 130 KiB) fits and the second, written beside it
    before replacing it, does not: ENOSPC from the kernel, not from a mock."""
    from frugalrl import checkpoint

    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(tiny_config().to_dict()))
    with _small_tmpfs(tmp_path / "disk", "256k") as disk:
        out = disk / "run"
        with pytest.raises(SystemExit) as exit_info:
            main(["train", str(config), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(err) == 1 and "No space left on device" in err[0], err
        assert checkpoint.load_checkpoint(out / "checkpoint.pt")["agent"]["update"] == 2  # the first one, whole
        assert not list(out.glob(".*.tmp"))  # the half-written one is gone, its space given back
        assert (out / "config.yaml").read_text() and all(
            json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
        )


@pytest.mark.slow
def test_a_tracking_server_that_comes_back_mid_run_gets_everything_without_sync(tmp_path, monkeypatch, capsys):
    """Killed after the 3rd update, started again after the 6th: the run sends what waited by itself
    (no `frugalrl sync`), ends FINISHED with its model logged, and MLflow holds every update once."""
    from frugalrl.tracking import runs

    port = _free_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(runs, "FLUSH_SECONDS", 0.0)  # every update is sent at once
    servers = [_start_server(tmp_path, port)]

    def away_from_3_to_6(learner, metrics) -> None:
        if learner.update == 3 and len(servers) == 1:
            _kill(servers[0])
            servers.append(None)
        elif learner.update == 6 and len(servers) == 2:
            servers.append(_start_server(tmp_path, port))  # the same store: the run is still there

    # while away, every flush asks whether it is back (tracking.reconnect_s: 30 s by default)
    tracking = {"enabled": True, "timeout_s": 2, "retries": 0, "reconnect_s": 0.01}
    config = tiny_config(tracking=tracking, ppo={"total_timesteps": 2048})
    out = tmp_path / "run"
    try:
        summary = train(config, out, interactive=False, on_update=away_from_3_to_6)
    finally:
        for server in servers:
            if server is not None and server.poll() is None:
                _kill(server)
    assert len(servers) == 3
    err = capsys.readouterr().err
    assert "stopped answering" in err and "answers again; what waited was sent" in err, err
    assert not (out / "mlflow_offline.jsonl").exists() and (out / "mlflow_offline.synced.jsonl").is_file()
    assert summary["model_uri"]  # logged at the end: the store was back
    updates = [json.loads(row)["update"] for row in (out / "metrics.jsonl").read_text().splitlines()]
    server = _start_server(tmp_path, port)  # read back what the store kept
    try:
        client = _client()
        assert client.get_run(summary["mlflow_run_id"]).info.status == "FINISHED"
        assert _metric_steps(client, summary["mlflow_run_id"], "policy_loss") == sorted(
            set(_metric_steps(client, summary["mlflow_run_id"], "policy_loss"))
        )
        assert len(_metric_steps(client, summary["mlflow_run_id"], "policy_loss")) == len(updates)
    finally:
        _kill(server)


@pytest.mark.slow
def test_a_server_restarting_at_the_start_is_waited_for_and_one_dying_right_after_loses_nothing(
    tmp_path, monkeypatch, capsys
):
    """CI's soak found both: a tuning worker's run start met an MLflow restart, and the store went away
    between the run's start and its parameters (a traceback, the run left RUNNING). Now the start waits
    for the store, and what follows it waits in the run directory like any metric."""
    import threading

    from frugalrl.tracking import offline, runs

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    servers = [_start_server(tmp_path, port)]
    original_start = runs.RunTracker._start

    def restarting_then_dying(tracker):  # noqa: ANN001 - RunTracker._start's own argument
        _kill(servers[0])  # the health check passed; the start meets the server down ...
        threading.Thread(target=lambda: servers.append(_start_server(tmp_path, port))).start()  # ... coming back
        run = original_start(tracker)
        _kill(servers[-1])  # ... and gone again before the parameters are sent
        return run

    monkeypatch.setattr(runs.RunTracker, "_start", restarting_then_dying)
    config = tiny_config(tracking={"enabled": True, "timeout_s": 2, "retries": 0, "reconnect_s": 1},
                         ppo={"total_timesteps": 1024})  # fmt: skip
    out = tmp_path / "run"
    try:
        summary = train(config, out, interactive=False)
    finally:
        for server in servers:
            if server.poll() is None:
                _kill(server)
    assert len(servers) == 2 and summary["eval_mean"] > 0
    err = capsys.readouterr().err
    assert "stopped answering while logging parameters" in err, err
    kinds = [entry["kind"] for entry in offline.pending(out)]
    assert kinds[:2] == ["params", "tags"], kinds

    server = _start_server(tmp_path, port)
    try:
        main(["sync", str(out)])
        assert "params" in capsys.readouterr().out
        run = _client().get_run(summary["mlflow_run_id"])
        assert run.info.status == "FINISHED" and run.data.params["ppo.total_timesteps"] == "1024"
        assert run.data.tags["frugalrl.config_hash"] == summary["config_hash"]
        assert len(_client().search_runs([run.info.experiment_id])) == 1  # the waited-for start made one run
    finally:
        _kill(server)


def test_a_start_whose_answer_was_lost_leaves_one_run(tmp_path, monkeypatch):
    """The store made the run and its answer never came (the server died, or answered after the timeout;
    MLflow's client retries such a POST too): the retried start made a second run, and the first stayed
    RUNNING, empty, for ever. Now the first goes to MLflow's trash."""
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    made = []
    create_run = MlflowClient.create_run

    def answer_lost_once(self, *args, **kwargs):  # noqa: ANN001 - MlflowClient.create_run's own arguments
        made.append(create_run(self, *args, **kwargs).info.run_id)
        if len(made) == 1:
            raise MlflowException("the connection closed before the answer")
        return self.get_run(made[-1])

    monkeypatch.setattr(MlflowClient, "create_run", answer_lost_once)
    config = tiny_config(tracking={"enabled": True, "reconnect_s": 0.1}, ppo={"total_timesteps": 512})
    summary = train(config, tmp_path / "run", interactive=False)
    client = _client()
    experiment = client.get_run(summary["mlflow_run_id"]).info.experiment_id
    assert len(made) == 2 and made[1] == summary["mlflow_run_id"]
    assert [r.info.run_id for r in client.search_runs([experiment])] == [summary["mlflow_run_id"]]
    assert [r.info.run_id for r in client.search_runs([experiment], run_view_type=ViewType.DELETED_ONLY)] == made[:1]


def test_a_replay_cut_short_resumes_after_what_it_sent(tmp_path, monkeypatch):
    """The store goes away again in the middle of sending what waited: the next replay sends only the
    rest (2,500 metrics go in three batches; the second batch fails the first time)."""
    import mlflow

    from frugalrl.tracking import offline

    sent_batches: list[list[int]] = []
    failures = [1]  # the second batch of the first replay

    class Client:
        def log_batch(self, run_id, metrics):
            if len(sent_batches) == 1 and failures:
                failures.pop()
                raise ConnectionError("the store went away again")
            sent_batches.append([m.step for m in metrics])

        def set_terminated(self, run_id, status):
            sent_batches.append([status])

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    entries = [{"kind": "metrics", "metrics": [["loss", 1.0, 0, step] for step in range(2500)]},
               {"kind": "end", "status": "FINISHED"}]  # fmt: skip
    (tmp_path / offline.OFFLINE_FILE).write_text("".join(json.dumps(e) + "\n" for e in entries))
    with pytest.raises(ConnectionError):
        offline.replay("run", offline.pending(tmp_path), tmp_path)
    offline.replay("run", offline.pending(tmp_path), tmp_path)
    steps = [step for batch in sent_batches[:-1] for step in batch]
    assert steps == list(range(2500)) and sent_batches[-1] == ["FINISHED"]  # each once, in order
    assert not (tmp_path / offline.OFFLINE_FILE).exists()
    synced = [json.loads(line) for line in (tmp_path / offline.SYNCED_FILE).read_text().splitlines()]
    assert sum(len(e["metrics"]) for e in synced if e["kind"] == "metrics") == 2500


def test_metrics_kept_by_a_run_resumed_while_the_store_was_away_skip_the_steps_it_holds(tmp_path, monkeypatch):
    """A resumed run redoes the steps after its checkpoint; when the store went away before the run could ask
    which of them it holds, the replay asks and sends only the others."""
    import mlflow
    from mlflow.entities import Metric

    from frugalrl.tracking import offline

    held = {"loss": [Metric("loss", 1.0, 0, step) for step in range(10)]}  # steps 0-9 logged before the kill
    sent: list[tuple[str, int]] = []

    class Client:
        def get_metric_history(self, run_id, key):
            return held.get(key, [])

        def log_batch(self, run_id, metrics):
            sent.extend((m.key, m.step) for m in metrics)

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    redone = [[key, 2.0, 1, step] for step in range(6, 14) for key in ("loss", "return")]  # from checkpoint 6
    entries = [{"kind": "metrics", "metrics": redone, "skip_held": True},
               {"kind": "metrics", "metrics": [["loss", 3.0, 2, 14]]}]  # fmt: skip
    (tmp_path / offline.OFFLINE_FILE).write_text("".join(json.dumps(e) + "\n" for e in entries))
    counts = offline.replay("run", offline.pending(tmp_path), tmp_path)
    assert sorted(s for k, s in sent if k == "loss") == [10, 11, 12, 13, 14]  # 6-9 were held
    assert sorted(s for k, s in sent if k == "return") == list(range(6, 14))  # none held
    assert counts["metrics"] == len(sent) == 13
