"""One process per run directory (issue 55 item 6): a second ``train`` into a directory a live process
trains into is refused in one line naming that process; a lock whose holder died never blocks."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from frugalrl.cli import main
from frugalrl.errors import CheckpointError
from frugalrl.rundir import preflight
from frugalrl.runlock import LOCK_FILE, RunDirBusy, RunLock, check_not_busy
from frugalrl.training import train

from .conftest import tiny_config

# A child that takes the run directory's lock as a training process does, says so, and holds it until killed
HOLDER = """
import sys, time
from frugalrl.runlock import RunLock
lock = RunLock.take(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


def _interrupted_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run stopped after its last checkpoint (no summary.json), and its config file."""
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps(tiny_config().to_dict()))
    run = tmp_path / "run"
    train(tiny_config(), run, interactive=False)
    (run / "summary.json").unlink()
    return run, config


def _files(run: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.iterdir())}


@pytest.fixture
def holder() -> Iterator[Callable[[Path], subprocess.Popen]]:
    """Starts a process holding a run directory's lock; each is killed at the end."""
    procs: list[subprocess.Popen] = []

    def start(run: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_info.value.code == 2 and len(lines) == 1, err
    return lines[0]


def test_a_second_train_into_a_live_run_is_refused_naming_its_pid_and_changes_nothing(tmp_path, holder, capsys):
    run, config = _interrupted_run(tmp_path)
    proc = holder(run)
    before = _files(run)
    assert {"metrics.jsonl", "config.yaml", "checkpoint.pt", LOCK_FILE} <= set(before)
    for argv in (["train", "--resume", str(run)], ["train", str(config), "--out", str(run)]):
        line = _refused(argv, capsys)
        assert line == (
            f"error: {run} is in use: another process (pid {proc.pid}) is training into it; wait for it to "
            f"finish, or stop it (kill {proc.pid}) and continue with: frugalrl train --resume {run}"
        )
        assert _files(run) == before  # metrics.jsonl not cut, config.yaml and checkpoint.pt not rewritten
    with pytest.raises(RunDirBusy, match=f"pid {proc.pid}"):  # taking it (two starts at once) is refused too
        RunLock.take(run)
    assert _files(run) == before
    (run / "summary.json").write_text("{}")  # a finished run too: the live process is named, not "finished"
    assert f"(pid {proc.pid})" in _refused(["train", "--resume", str(run)], capsys)


def test_a_lock_whose_holder_was_killed_does_not_block_the_resume(tmp_path, holder, capsys):
    run, _ = _interrupted_run(tmp_path)
    proc = holder(run)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert (run / LOCK_FILE).read_text().strip() == str(proc.pid)  # the dead holder's pid is still written there
    main(["train", "--resume", str(run)])
    out = capsys.readouterr().out
    assert f"resuming {run} from update" in out and (run / "summary.json").is_file()
    assert (run / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_a_run_holds_its_lock_while_it_trains_and_releases_it_at_the_end(tmp_path, capsys):
    run = tmp_path / "run"
    seen: list[str] = []

    def probe(learner, metrics) -> None:  # another open of the lock file: refused while the run holds it
        with pytest.raises(RunDirBusy) as busy:
            check_not_busy(run)
        seen.append(str(busy.value))

    train(tiny_config(), run, interactive=False, on_update=probe)
    assert seen and f"(pid {os.getpid()})" in seen[0]
    check_not_busy(run)  # released: nothing refuses
    # a later resume of the finished run behaves as before
    assert "is a finished run" in _refused(["train", "--resume", str(run)], capsys)
    # and a set-up refused after taking the lock (another config's checkpoint) lets it go too
    (run / "summary.json").unlink()
    with pytest.raises(CheckpointError, match="different config"):
        train(tiny_config(seed=9), run, resume=True, interactive=False)
    with RunLock.take(run) as lock:
        assert lock.held


def test_a_directory_holding_only_a_dead_runs_lock_file_takes_a_new_run(tmp_path):
    """A run killed while it set up leaves ``RUN/.lock`` alone: that directory counts as empty."""
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text("4242\n")
    summary = train(tiny_config(), run, interactive=False)
    assert summary["updates"] > 0 and (run / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_a_set_up_refused_by_the_lock_never_removes_the_directory(tmp_path):
    """Two new runs started at once both find no directory; the one refused must not remove the other's."""
    run = tmp_path / "run"
    with pytest.raises(RunDirBusy), preflight(run):
        run.mkdir()  # the other process made it and holds it
        raise RunDirBusy("in use")
    assert run.is_dir()
