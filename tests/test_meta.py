"""The meta-controller, score stages, Boltzmann exploration, and "all parts off is plain DQN"."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from frugalrl.config import ScoreStagesConfig
from frugalrl.meta import MetaController, RMTSettings, ScoreStages
from frugalrl.policy_store import load_policy_file
from frugalrl.training import train

from .test_dqn import dqn_config


def test_meta_controller_never_leaves_its_bounds_under_adversarial_inputs():
    config = RMTSettings(interval=1, lr_bounds=(1e-5, 1e-3), gamma_bounds=(0.9, 0.99))
    meta = MetaController(config, learning_rate=5.0, gamma=2.0, exploration=-1.0)  # out of bounds to start
    rng = np.random.default_rng(0)
    weird = [math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, -5.0, 1e-300]
    for step in range(5000):
        entropy = weird[step % len(weird)] if step % 3 == 0 else float(rng.normal(0, 1e6))
        loss = (
            weird[(step + 1) % len(weird)] if step % 2 == 0 else float(abs(rng.normal(0, 10.0 ** rng.integers(-6, 12))))
        )
        meta.observe(entropy, loss)
        assert 1e-5 <= meta.learning_rate <= 1e-3
        assert 0.9 <= meta.gamma <= 0.99
        assert 0.01 <= meta.exploration <= 0.3
        assert all(math.isfinite(v) for v in meta.values.values())
    assert meta.history  # it did act


def test_meta_controller_rules_and_reasons():
    config = RMTSettings(interval=1)
    meta = MetaController(config, 5e-4, 0.95, 0.05)
    for _ in range(30):
        meta.observe(0.5, 1.0)  # settled value loss, steady entropy
    assert meta.learning_rate > 5e-4 and meta.gamma > 0.95 and meta.exploration < 0.05
    rising = meta.observe(0.5, 100.0)
    assert {c.name for c in rising} == {"learning_rate", "gamma"}
    assert all("value loss rising" in c.reason for c in rising)
    collapsing = []
    for h in np.linspace(1.0, 0.0, 10):
        collapsing += meta.observe(float(h), 1.0)
    assert any(c.name == "exploration" and c.new > c.old for c in collapsing)


def test_score_stages_switch_once_at_each_threshold():
    stages = ScoreStages(ScoreStagesConfig(stages=[{"threshold": 100, "learning_rate": 1e-4, "gamma": 0.95},
                                                   {"threshold": 300, "learning_rate": 5e-5}]))  # fmt: skip
    assert stages.observe(50.0, 3e-4, 0.99) == []
    first = stages.observe(150.0, 3e-4, 0.99)
    assert [(c.name, c.new) for c in first] == [("learning_rate", 1e-4), ("gamma", 0.95)]
    assert stages.observe(150.0, 1e-4, 0.95) == []
    assert [(c.name, c.new) for c in stages.observe(float("nan"), 1e-4, 0.95)] == []
    assert [(c.name, c.new) for c in stages.observe(400.0, 1e-4, 0.95)] == [("learning_rate", 5e-5)]
    with pytest.raises(ValueError, match="must increase"):
        ScoreStagesConfig(stages=[{"threshold": 300}, {"threshold": 100}])


def test_every_part_off_is_plain_dqn_parameter_for_parameter(tmp_path):
    plain = dqn_config()
    parts_off = dqn_config(
        replay={"kind": "uniform"},
        meta={"kind": "fixed"},
        dqn={"exploration": "epsilon", "temperature_bounds": (0.2, 0.5)},
        policy={"block": "plain"},
        score_stages={"stages": []},
    )
    train(plain, tmp_path / "plain")
    train(parts_off, tmp_path / "off")
    a, _ = load_policy_file(tmp_path / "plain")
    b, _ = load_policy_file(tmp_path / "off")
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    train(dqn_config(dqn={"exploration": "boltzmann"}), tmp_path / "on")
    c, _ = load_policy_file(tmp_path / "on")
    assert not all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values(), strict=True))


def test_meta_controller_in_a_run_logs_its_values_and_explains_changes(tmp_path, capsys):
    config = dqn_config(
        meta={"kind": "rmt", "settings": {"interval": 2, "settle_tolerance": 10.0}},  # always "settled": it must act
        dqn={"exploration": "boltzmann", "total_timesteps": 2000},
        score_stages={"stages": [{"threshold": 0.0, "gamma": 0.95}]},
    )
    summary = train(config, tmp_path / "run")
    assert set(summary["techniques"]) == {"meta_controller", "boltzmann_exploration", "score_stages"}
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "meta_learning_rate" in rows[-1] and "temperature" in rows[-1]
    assert rows[-1]["learning_rate"] == rows[-1]["meta_learning_rate"] > rows[0]["learning_rate"]
    assert (tmp_path / "run" / "control_trace.png").read_bytes()[:4] == b"\x89PNG"
    assert summary["final_learning_rate"] == rows[-1]["learning_rate"] and "replay_top10_share" in summary
    out = capsys.readouterr().out
    assert "meta: gamma 0.99 -> 0.95 (mean return" in out  # the score stage, explained
    assert "meta: learning_rate" in out and "value loss settled" in out


@pytest.mark.slow
def test_lunarlander_rmt_config_reports_tiers_and_final_hyperparameters(tmp_path):
    from frugalrl.config import load_config

    from .conftest import REPO

    # the config ships tiered replay off (it measured a loss); switched on here to check its reporting
    overrides = ["dqn.total_timesteps=800", "dqn.learning_starts=200", "replay.capacity=2000", "eval.episodes=1",
                 "tracking.enabled=false", "meta.settings.interval=2", "replay.kind=tiered"]  # fmt: skip
    summary = train(load_config(REPO / "configs" / "lunarlander-rmt.yaml", overrides), tmp_path / "run")
    for key in ("replay_hot_size", "replay_warm_size", "replay_cold_size", "replay_hot_threshold",
                "replay_top10_share", "final_learning_rate", "final_gamma", "final_epsilon"):  # fmt: skip
        assert summary[key] is not None, key
    assert 1e-5 <= summary["final_learning_rate"] <= 1e-3 and 0.9 <= summary["final_gamma"] <= 0.99
    assert set(summary["techniques"]) == {
        "replay_tiered", "meta_controller", "boltzmann_exploration", "score_stages", "fractal"
    }  # fmt: skip


@pytest.mark.slow
def test_breakout_dqn_stores_frames_once_and_learns_from_stacks(tmp_path):
    from frugalrl.config import load_config

    from .conftest import REPO

    overrides = ["env.num_envs=2", "dqn.total_timesteps=400", "dqn.learning_starts=100", "dqn.batch_size=8",
                 "replay.capacity=1000", "replay.max_bytes=20000000", "eval.episodes=1", "tracking.enabled=false",
                 "device=cpu", "threads=1", "env.atari.max_episode_steps=120"]  # fmt: skip
    summary = train(load_config(REPO / "configs" / "breakout-rmt.yaml", overrides), tmp_path / "run")
    assert summary["replay_bytes"] <= 20_000_000 and summary["gradient_updates"] > 0
