"""PPO on real envs: determinism, learning, continuous and pixel policies, cost counts, divergence guard."""

from __future__ import annotations

import json

import pytest
import torch

from frugalrl.algos.ppo import PPO
from frugalrl.cost import CostMeter
from frugalrl.envs import make_vec_env
from frugalrl.errors import TrainingDiverged
from frugalrl.training import train

from .conftest import tiny_config

CONTRACT_KEYS = {
    "env_id", "algo", "seed", "techniques", "real_env_steps", "virtual_env_steps", "forward_samples",
    "backward_samples", "train_flops", "wall_s", "env_s", "learn_s", "peak_rss_mb", "eval_mean",
    "eval_std", "eval_iqm", "eval_episodes", "mlflow_run_id",
}  # fmt: skip


def _agent(config):
    torch.manual_seed(config.seed)
    env = make_vec_env(config.env, gamma=config.ppo.gamma)
    agent = PPO(config, env, CostMeter(), torch.device("cpu"))
    agent.start(config.seed)
    return agent


def _params(agent):
    return torch.cat([p.detach().flatten() for p in agent.policy.parameters()])


def _trained_params(config, updates=3):
    agent = _agent(config)  # the global torch RNG is seeded here, so agents run one after another
    for _ in range(updates):
        agent.run_update()
    return _params(agent)


def test_same_seed_same_parameters_different_seed_different():
    a, b, c = _trained_params(tiny_config()), _trained_params(tiny_config()), _trained_params(tiny_config(seed=4))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_cost_meter_counts_what_ran():
    config = tiny_config()
    agent = _agent(config)
    for _ in range(2):
        agent.run_update()
    meter = agent.meter
    rollout = config.env.num_envs * config.ppo.num_steps  # 128
    assert meter.real_env_steps == 2 * rollout
    assert meter.backward_samples == meter.forward_samples == 2 * config.ppo.update_epochs * rollout
    assert meter.inference_samples >= meter.real_env_steps
    # Two 4-64-64 tanh MLPs + heads: forward FLOPs per sample are 2 * (sum of in*out of the linear layers).
    linear = (4 * 64 + 64 * 64) * 2 + 64 * 2 + 64 * 1
    assert meter.flops_per_sample["forward"] == 2 * linear
    assert meter.flops_per_sample["backward"] > meter.flops_per_sample["forward"]
    assert meter.train_flops == pytest.approx(
        meter.flops_per_sample["forward"] * meter.forward_samples
        + meter.flops_per_sample["backward"] * meter.backward_samples
    )
    assert meter.seconds["env"] > 0 and meter.seconds["learn"] > 0


def test_ppo_learns_cartpole(tmp_path):
    config = tiny_config(
        env={"id": "CartPole-v1", "num_envs": 8},
        ppo={"total_timesteps": 25_000, "batch_size": 256, "update_epochs": 10},
        eval={"episodes": 10},
    )
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["eval_mean"] > 150, summary["eval_mean"]  # random play scores about 22


def test_continuous_actions_on_mujoco(tmp_path):
    config = tiny_config(
        env={"id": "HalfCheetah-v5", "num_envs": 2, "normalize_obs": True, "normalize_reward": True},
        ppo={"total_timesteps": 256, "num_steps": 64, "batch_size": 64},
        eval={"episodes": 1},
    )
    config.env.kwargs = {"max_episode_steps": 50}
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["real_env_steps"] == 256
    assert summary["eval_episodes"] == 1


def test_pixel_policy_on_atari(tmp_path):
    config = tiny_config(
        env={"id": "ALE/Breakout-v5", "num_envs": 2, "clip_reward": 1.0, "atari": {"max_episode_steps": 400}},
        ppo={"total_timesteps": 64, "num_steps": 32, "batch_size": 32, "update_epochs": 1},
        eval={"episodes": 1},
    )
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["flops_per_sample"]["forward"] > 1e7  # Nature-CNN, not an MLP


def test_summary_json_holds_the_run_contract(tmp_path):
    summary = train(tiny_config(), tmp_path / "run", interactive=False)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(on_disk) >= CONTRACT_KEYS
    assert on_disk == summary
    for name in ("config.yaml", "checkpoint.pt", "policy.pt", "metrics.jsonl"):
        assert (tmp_path / "run" / name).is_file()


def test_nan_loss_stops_with_clear_error_and_keeps_checkpoint(tmp_path):
    config = tiny_config(
        env={"id": "FrugalTest/NaNReward-v0", "num_envs": 1},
        ppo={"total_timesteps": 320, "num_steps": 16, "batch_size": 16},
        checkpoint={"every_updates": 1},
    )
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match="loss became nan .* last good checkpoint kept"):
        train(config, out, interactive=False)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert state["agent"]["update"] == 2  # rewards turn NaN in the third rollout
    assert all(torch.isfinite(p).all() for p in state["agent"]["policy"].values())


def test_existing_run_is_never_overwritten(tmp_path):
    from frugalrl.errors import FrugalError

    out = tmp_path / "run"
    train(tiny_config(), out, interactive=False)
    before = (out / "checkpoint.pt").read_bytes()
    with pytest.raises(FrugalError, match="--resume"):
        train(tiny_config(), out, interactive=False)
    assert (out / "checkpoint.pt").read_bytes() == before
