"""Config validation: the shipped files are valid; bad input gets one clear line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.config import apply_overrides, flatten, load_config, validate_config
from frugalrl.errors import ConfigError

from .conftest import REPO

SHIPPED = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_configs_validate(path):
    config = load_config(path)
    assert config.name == path.stem


def test_required_configs_ship():
    names = {p.name for p in SHIPPED}
    assert {"cartpole-ppo.yaml", "lunarlander-ppo.yaml", "breakout-ppo.yaml", "halfcheetah-ppo.yaml"} <= names


def test_overrides_parse_yaml_scalars_and_nested_keys(tmp_path):
    config = load_config(
        REPO / "configs/cartpole-ppo.yaml", ["ppo.learning_rate=3e-4", "env.normalize_obs=true", "seed=7"]
    )
    assert config.ppo.learning_rate == pytest.approx(3e-4)
    assert config.env.normalize_obs is True
    assert config.seed == 7
    assert apply_overrides({}, ["a.b.c=[1, 2]"], "x") == {"a": {"b": {"c": [1, 2]}}}


def test_hash_is_stable_and_sensitive():
    a = load_config(REPO / "configs/cartpole-ppo.yaml")
    b = load_config(REPO / "configs/cartpole-ppo.yaml")
    c = load_config(REPO / "configs/cartpole-ppo.yaml", ["seed=2"])
    assert a.hash() == b.hash() != c.hash()
    assert flatten(a.to_dict())["ppo.gamma"] == 0.98


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


BAD_INPUTS = {
    "unknown key": ({"ppo": {"lr": 0.001}}, [], ["ppo.lr", "unknown key", "learning_rate"]),
    "wrong type": ({"ppo": {"num_steps": "many"}}, [], ["ppo.num_steps", "'many'", "integer"]),
    "negative learning rate": (
        {"ppo": {"learning_rate": -0.001}},
        [],
        ["ppo.learning_rate", "-0.001", "greater than 0"],
    ),
    "unknown env id": ({"env": {"id": "NoSuchGame-v9"}}, [], ["env.id", "NoSuchGame-v9", "CartPole-v1"]),
    "not allowed choice": ({"device": "tpu"}, [], ["device", "'tpu'", "'cpu'"]),
    "batch larger than rollout": ({"ppo": {"batch_size": 100000}}, [], ["batch_size", "100000", "<= 256"]),
    "invalid yaml": ("ppo: [unclosed", [], ["not valid YAML", "line"]),
    "override without '='": ({}, ["ppo.learning_rate"], ["--set key.sub=value"]),
    "override with bad value": ({}, ["env.num_envs=0"], ["env.num_envs", "0", "greater than or equal to 1"]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_config_exits_2_with_one_line(case, tmp_path, capsys):
    data, overrides, expected = BAD_INPUTS[case]
    path = _write(tmp_path, data)
    args = ["config", "validate", str(path)] + [arg for o in overrides for arg in ("--set", o)]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {path}")
    for fragment in expected:
        assert fragment in err, (fragment, err)


def test_missing_file_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "validate", str(tmp_path / "nope.yaml")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    hint = "pass an existing file such as configs/cartpole-ppo.yaml"
    assert err == f"error: {tmp_path / 'nope.yaml'}: config file not found; {hint}"


def test_bad_config_through_the_real_command_has_no_traceback(tmp_path):
    path = _write(tmp_path, {"ppo": {"learning_rate": -1}})
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "frugalrl.cli", "train", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {path}: ppo.learning_rate = -1")
    assert not out.exists(), "nothing is written for a config that does not validate"


def test_the_cli_and_the_config_bound_evaluation_episodes_alike():
    from frugalrl import config
    from frugalrl.cli import training

    assert training.MAX_EVAL_EPISODES == config.MAX_EVAL_EPISODES
    with pytest.raises(ConfigError, match="eval.episodes"):
        validate_config({"eval": {"episodes": config.MAX_EVAL_EPISODES + 1}})
