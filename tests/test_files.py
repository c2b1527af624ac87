"""Every text file a command reads goes through ``frugalrl.files``: random bytes, an empty file and a truncated
copy of a real one are one line naming the file, and nothing is changed; ``sync`` sends what it can, says what it
cannot, and leaves a live run alone."""

from __future__ import annotations

import json
import os

import mlflow
import pytest

from frugalrl.cli import main
from frugalrl.errors import CheckpointError
from frugalrl.files import read_json_lines, read_json_object
from frugalrl.peft.table import read_runs
from frugalrl.runlock import RunLock
from frugalrl.tracking import offline

SUMMARY = json.dumps({"mlflow_run_id": "abc", "eval_mean": 1.0, "env_id": "CartPole-v1"}, indent=2)
ENTRIES = ({"kind": "tags", "tags": {"a": "1"}}, {"kind": "end", "status": "KILLED"})
BUFFER = "".join(json.dumps(e) + "\n" for e in ENTRIES)
RUNS = "target,method,seed,eval_mean,curve\nheavy,lora,1,12.5,[]\nheavy,full,1,14.0,[]\n"


def _bad(real: str) -> dict[str, bytes]:
    return {"random bytes": os.urandom(512) + b"\xff\xfe", "empty": b"", "truncated": real.encode()[: len(real) // 2]}


@pytest.mark.parametrize("case", ["random bytes", "empty", "truncated"])
def test_each_reader_refuses_damaged_content_in_one_line_naming_the_file(tmp_path, case):
    readers = [
        ("summary.json", SUMMARY, lambda p: read_json_object(p, "the run's", "restore it")),
        (
            "mlflow_offline.jsonl",
            BUFFER,
            lambda p: read_json_lines(p, "the offline buffer", "restore it", last_may_be_cut=False),
        ),  # fmt: skip
        ("peft_runs.csv", RUNS, read_runs),
    ]
    for name, real, read in readers:
        path = tmp_path / name
        path.write_bytes(_bad(real)[case])
        before = path.read_bytes()
        try:
            read(path)
        except CheckpointError as error:
            message = str(error)
            assert str(path) in message and "\n" not in message, message
        else:  # an empty or cut buffer or table is none or fewer rows (a kill leaves them so); a summary is whole
            assert case in ("truncated", "empty") and name != "summary.json", name
        assert path.read_bytes() == before  # nothing changed


def test_a_line_cut_by_a_kill_is_dropped_but_a_damaged_line_before_it_is_refused(tmp_path):
    path = tmp_path / "mlflow_offline.jsonl"
    path.write_text(BUFFER + '{"kind": "ta')
    assert [e["kind"] for e in read_json_lines(path, "the offline buffer", "fix")] == ["tags", "end"]
    path.write_text('{"kind": "ta\n' + BUFFER)
    with pytest.raises(CheckpointError, match=r"line 1 is not JSON"):
        read_json_lines(path, "the offline buffer", "fix")


@pytest.mark.parametrize("damaged", ["summary.json", "mlflow_offline.jsonl"])
def test_sync_of_a_damaged_run_directory_is_one_line_and_changes_nothing(tmp_path, capsys, damaged):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(SUMMARY)
    (out / offline.OFFLINE_FILE).write_text(BUFFER)
    (out / damaged).write_bytes(os.urandom(256) + b"\xff")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(SystemExit) as exited:
        main(["sync", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and damaged in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != ".lock"} == before


def test_sync_refuses_a_run_a_live_process_holds(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(SUMMARY)
    with RunLock.take(out), pytest.raises(SystemExit) as exited:  # the lock: the training process, still running
        main(["sync", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"{out} is in use" in err and err.count("\n") == 1


def test_sync_sends_what_it_can_reports_a_gone_file_and_keeps_what_it_cannot_send(tmp_path, monkeypatch):
    calls: list[tuple] = []

    class Client:
        def log_artifact(self, run_id, path, artifact_path=None):
            calls.append(("artifact", os.path.basename(path)))

        def set_tag(self, run_id, key, value):
            calls.append(("tag", key))

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    kept = tmp_path / "kept.txt"
    kept.write_text("x")
    entries = [{"kind": "artifact", "path": str(tmp_path / "gone.txt"), "artifact_path": "run"},
               {"kind": "from-a-newer-frugalrl", "what": 1},
               {"kind": "artifact", "path": str(kept), "artifact_path": "run"},
               {"kind": "tags", "tags": {"a": "1"}}]  # fmt: skip
    (tmp_path / offline.OFFLINE_FILE).write_text("".join(json.dumps(e) + "\n" for e in entries))
    sent = offline.replay("run", offline.pending(tmp_path), tmp_path)
    assert calls == [("artifact", "kept.txt"), ("tag", "a")]
    assert sent["missing files"] == 1 and sent["left waiting"] == 1 and sent["artifacts"] == 1
    assert offline.pending(tmp_path) == [entries[1]]  # still waiting, for a frugalrl that knows it
    synced = [json.loads(line) for line in (tmp_path / offline.SYNCED_FILE).read_text().splitlines()]
    assert synced[0]["missing"] is True and len(synced) == 3


def test_play_registered_refuses_no_episodes_and_an_unknown_model_in_one_line(tmp_path):
    import subprocess
    import sys

    from .conftest import REPO

    script = str(REPO / "scripts" / "play_registered.py")
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    for args, says in ((["models:/x@champion", "--episodes", "0"], "at least 1"),
                       (["models:/doesnotexist@champion"], "models:/doesnotexist@champion")):  # fmt: skip
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip() and "INFO" not in line]
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert lines[-1].startswith(("error:", "play_registered.py: error:")), lines
