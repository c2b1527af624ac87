"""The frugalrl command: check, evaluate, train output."""

from __future__ import annotations

import json

from frugalrl.cli import main
from frugalrl.train import train

from .conftest import tiny_config


def test_check_reports_every_component(capsys):
    main(["check"])  # returns normally only when every check passes
    out = capsys.readouterr().out
    for name in ("torch", "ALE", "MuJoCo", "Box2D", "MLflow", "kfp"):
        assert name in out
    assert "FAIL" not in out


def test_evaluate_a_run_directory_over_fixed_seeds(tmp_path, capsys):
    train(tiny_config(), tmp_path / "run", interactive=False)
    capsys.readouterr()
    main(["evaluate", str(tmp_path / "run"), "--episodes", "4", "--json"])
    first = json.loads(capsys.readouterr().out)
    main(["evaluate", str(tmp_path / "run" / "policy.pt"), "--episodes", "4", "--json"])
    second = json.loads(capsys.readouterr().out)
    assert first["env_id"] == "CartPole-v1"
    assert first["eval_episodes"] == 4
    assert first["returns"] == second["returns"]


def test_evaluate_missing_model_is_a_clear_error(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    assert "not found" in capsys.readouterr().err
