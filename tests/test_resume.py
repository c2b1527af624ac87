"""A run killed with SIGKILL and resumed ends with the same parameters as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml

from frugalrl.checkpoint import load_checkpoint, save_checkpoint
from frugalrl.cli import main
from frugalrl.errors import CheckpointError


def _config_file(tmp_path, selection: str = "all", compile_mode: str = "auto"):
    data = {
        "selection": {
            "kind": selection,
            **({"settings": {"warmup_steps": 512, "refresh_every_updates": 3}} if selection == "pivot" else {}),
        },
        "name": "resume",
        "seed": 11,
        "env": {"id": "CartPole-v1", "num_envs": 4},
        "ppo": {
            "total_timesteps": 64 * 128,
            "num_steps": 32,
            "batch_size": 64,
            "update_epochs": 4,
            "compile": compile_mode,
        },
        "eval": {"episodes": 3},
        "checkpoint": {"every_updates": 4},
        "tracking": {"enabled": False},
    }
    path = tmp_path / "resume.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _frugalrl(*args):
    return [sys.executable, "-m", "frugalrl.cli", *args]


def _policy_params(run_dir):
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    return state["agent"]["policy"], state["agent"]["optimizer"]


@pytest.mark.slow
@pytest.mark.parametrize(("selection", "compile_mode"), [("all", "auto"), ("pivot", "auto"), ("all", "off")])
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, selection, compile_mode):
    """Bit-identical within one step kind: the fused step (``auto`` on CPU) and eager autograd."""
    config = _config_file(tmp_path, selection, compile_mode)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(
        _frugalrl("train", str(config), "--out", str(straight)), check=True, capture_output=True, timeout=300
    )

    proc = subprocess.Popen(
        _frugalrl("train", str(config), "--out", str(killed)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    checkpoint = killed / "checkpoint.pt"
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    interrupted_at = load_checkpoint(checkpoint)["agent"]["update"]
    assert 0 < interrupted_at < 64, "the kill must land mid-run for the test to mean anything"
    assert not (killed / "summary.json").exists()

    subprocess.run(_frugalrl("train", "--resume", str(killed)), check=True, capture_output=True, timeout=300)

    params_a, optim_a = _policy_params(straight)
    params_b, optim_b = _policy_params(killed)
    assert params_a.keys() == params_b.keys()
    for name in params_a:
        assert torch.equal(params_a[name], params_b[name]), name
    assert torch.equal(optim_a["state"][0]["exp_avg"], optim_b["state"][0]["exp_avg"])
    if selection == "pivot":  # the evaluator, refreshed during training, resumes exactly too
        ev_a = torch.load(straight / "checkpoint.pt", weights_only=True)["agent"]["selector"]["evaluator"]
        ev_b = torch.load(killed / "checkpoint.pt", weights_only=True)["agent"]["selector"]["evaluator"]
        assert all(torch.equal(ev_a[k], ev_b[k]) for k in ev_a)


def test_corrupt_checkpoint_is_a_clear_error_and_is_kept(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(_config_file(tmp_path).read_text())
    (run / "checkpoint.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", str(run)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: checkpoint {run / 'checkpoint.pt'} is corrupt")
    assert (run / "checkpoint.pt").read_bytes() == b"not a checkpoint at all"


def test_checkpoint_from_another_config_is_refused(tmp_path):
    from frugalrl.config import load_config
    from frugalrl.training import train

    config_path = _config_file(tmp_path)
    run = tmp_path / "run"
    train(load_config(config_path, ["ppo.total_timesteps=512"]), run, interactive=False)
    with pytest.raises(CheckpointError, match="different config"):
        train(load_config(config_path), run, resume=True, interactive=False)


def test_checkpoint_write_is_atomic(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"format": "x", "value": torch.arange(3)})
    assert torch.equal(load_checkpoint(path)["value"], torch.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temp files left behind


OLDER = "was written by an older frugalrl (schema 0); it cannot be resumed by this version: retrain, or resume " \
    "with the frugalrl version that wrote it"  # fmt: skip


def _stopped_run(tmp_path):
    """A run stopped before its end (no summary.json): what ``--resume`` continues."""
    from frugalrl.config import load_config
    from frugalrl.training import train

    config = load_config(_config_file(tmp_path), ["ppo.total_timesteps=512"])
    run = tmp_path / "run"
    train(config, run, interactive=False)
    (run / "summary.json").unlink()
    return config, run


def test_a_checkpoint_of_before_the_schema_version_is_refused_on_resume(tmp_path, capsys):
    from frugalrl.config import SCHEMA_VERSION
    from frugalrl.resume import check_resumable

    config, run = _stopped_run(tmp_path)
    state = load_checkpoint(run / "checkpoint.pt")
    assert state["schema_version"] == SCHEMA_VERSION
    check_resumable(state, config, run)  # today's checkpoint resumes
    del state["schema_version"]  # as every checkpoint written before configs were versioned
    save_checkpoint(run / "checkpoint.pt", state)
    kept = {p.name: p.read_bytes() for p in run.iterdir()}
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", str(run)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: checkpoint {run / 'checkpoint.pt'} {OLDER}"
    assert {p.name: p.read_bytes() for p in run.iterdir()} == kept  # refused before anything is rewritten


def test_a_run_whose_config_yaml_is_in_schema_zero_is_refused_as_a_run(tmp_path, capsys):
    import frugalrl

    _, run = _stopped_run(tmp_path)
    data = yaml.safe_load((run / "config.yaml").read_text())
    del data["schema_version"]
    data["replay"]["alpha"] = 0.6  # a dump of before versioning held every moved key
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", str(run)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: run {run} {OLDER}"
    with pytest.raises(CheckpointError) as info:
        frugalrl.train(_config_file(tmp_path), run, resume=True)  # the API, given a config of today's keys
    assert str(info.value) == f"run {run} {OLDER}"
