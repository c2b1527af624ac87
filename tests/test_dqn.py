"""Double DQN: targets, a short run through the run contract, replay kinds, export and reload."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from frugalrl.algos.dqn import DQN
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError
from frugalrl.policy_store import load_policy_file
from frugalrl.training import train

from .conftest import tiny_config


def dqn_config(**sections):
    base = {
        "algo": "dqn",
        "env": {"id": "CartPole-v1", "num_envs": 2},
        "dqn": {"total_timesteps": 1200, "learning_starts": 200, "train_freq": 8, "gradient_steps": 2,
                "batch_size": 32, "target_update_interval": 100},
        "replay": {"capacity": 5000},
    }  # fmt: skip
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return tiny_config(**base)


def test_double_dqn_target_takes_the_online_argmax_and_the_target_value():
    config = dqn_config(dqn={"gamma": 0.5})
    agent = DQN(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    next_obs = torch.randn(6, 4)
    online, target = agent.policy(next_obs), agent.target(next_obs)
    with torch.no_grad():
        for p in agent.target.parameters():
            p.add_(torch.randn_like(p))  # online and target now disagree
        target = agent.target(next_obs)
        online = agent.policy(next_obs)
    rewards, terminated = torch.ones(6), torch.tensor([0, 0, 0, 1, 1, 0], dtype=torch.float32)
    double = agent.td_targets(rewards, next_obs, terminated)
    expected = 1 + 0.5 * (1 - terminated) * target.gather(1, online.argmax(-1, keepdim=True)).squeeze(1)
    torch.testing.assert_close(double, expected)
    agent.hp.double = False
    torch.testing.assert_close(
        agent.td_targets(rewards, next_obs, terminated), 1 + 0.5 * (1 - terminated) * target.max(-1).values
    )


@pytest.mark.parametrize("kind", ["uniform", "prioritized", "tiered"])
def test_dqn_run_writes_the_contract_with_replay_statistics(tmp_path, kind):
    summary = train(dqn_config(replay={"kind": kind}), tmp_path / "run")
    assert summary["algo"] == "dqn" and summary["real_env_steps"] >= 1200
    assert summary["backward_samples"] > 0 and summary["train_flops"] > 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["replay_size"] > 0 and rows[-1]["epsilon"] < rows[0]["epsilon"]
    if kind != "uniform":
        assert summary["techniques"] == [f"replay_{kind}"]
    if kind == "tiered":
        assert rows[-1]["replay_hot_size"] + rows[-1]["replay_warm_size"] + rows[-1]["replay_cold_size"] > 0
    policy, config = load_policy_file(tmp_path / "run")
    assert config.algo == "dqn"
    actions = policy.act(torch.zeros(3, 4))
    assert actions.shape == (3,) and actions.dtype == torch.long


def test_dqn_learns_from_the_same_seed_identically(tmp_path):
    a = train(dqn_config(), tmp_path / "a")
    b = train(dqn_config(), tmp_path / "b")
    assert a["eval_returns"] == b["eval_returns"]
    pa, _ = load_policy_file(tmp_path / "a")
    pb, _ = load_policy_file(tmp_path / "b")
    for (name, x), (_, y) in zip(pa.state_dict().items(), pb.state_dict().items(), strict=True):
        assert torch.equal(x, y), name


def test_dqn_config_errors():
    with pytest.raises(ConfigError, match="warm_quantile"):
        dqn_config(replay={"kind": "tiered", "settings": {"hot_quantile": 0.5, "warm_quantile": 0.6}})
    with pytest.raises(ConfigError, match="PPO only"):
        dqn_config(selection={"kind": "pivot"})
    config = dqn_config(env={"id": "Pendulum-v1"})
    with pytest.raises(ValueError, match="discrete action space"):
        DQN(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))


def test_epsilon_decays_linearly_to_its_floor():
    config = dqn_config(dqn={"exploration_fraction": 0.5, "exploration_final_eps": 0.1, "total_timesteps": 1000})
    agent = DQN(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    for step, eps in [(0, 1.0), (250, 0.55), (500, 0.1), (900, 0.1)]:
        agent.global_step = step
        assert agent.epsilon() == pytest.approx(eps)
    assert np.isfinite(agent.epsilon())


def test_pipeline_train_step_takes_an_off_policy_config_and_logs_its_trace(tmp_path):
    from mlflow import MlflowClient

    from frugalrl.ops.steps import train_step

    config = dqn_config(replay={"kind": "tiered"}, tracking={"enabled": True, "log_model": True})
    summary = train_step(json.dumps(config.to_dict()), [], str(tmp_path / "run"), pipeline_run_id="p-1")
    client = MlflowClient()
    run = client.get_run(summary["mlflow_run_id"])
    assert "replay_hot_size" in run.data.metrics and run.data.tags["frugalrl.pipeline_run_id"] == "p-1"
    assert "run/control_trace.png" in [a.path for a in client.list_artifacts(run.info.run_id, "run")]
