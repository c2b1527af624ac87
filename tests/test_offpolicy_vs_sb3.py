"""benchmarks/offpolicy_vs_sb3.py without training anything: the config -> SB3 mapping of its four configs, the
settings it refuses, the rendered verdict on synthetic rows, ``--resume`` and ``--report-only`` without rows."""

from __future__ import annotations

import inspect
import sys

import pytest
from torch import nn

from benchmarks import _report
from benchmarks import offpolicy_vs_sb3 as bench
from frugalrl.config import load_config

from .conftest import REPO

RELU_256 = {"net_arch": [256, 256], "activation_fn": nn.ReLU}
# RL Zoo's hyperparameters (hyperparams/sac.yml, dqn.yml), as SB3 keyword arguments
EXPECTED = {
    "Pendulum-v1": ("SAC", dict(learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256,
                                tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
                                target_entropy="auto", policy_kwargs=RELU_256)),
    "HalfCheetah-v5": ("SAC", dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=10_000, batch_size=256,
                                   tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
                                   target_entropy="auto", policy_kwargs=RELU_256)),
    "CartPole-v1": ("DQN", dict(learning_rate=2.3e-3, buffer_size=100_000, learning_starts=1000, batch_size=64,
                                tau=1.0, gamma=0.99, train_freq=256, gradient_steps=128, target_update_interval=10,
                                exploration_fraction=0.16, exploration_initial_eps=1.0, exploration_final_eps=0.04,
                                max_grad_norm=10.0, policy_kwargs=RELU_256)),
    "LunarLander-v3": ("DQN", dict(learning_rate=6.3e-4, buffer_size=50_000, learning_starts=0, batch_size=128,
                                   tau=1.0, gamma=0.99, train_freq=4, gradient_steps=4, target_update_interval=250,
                                   exploration_fraction=0.12, exploration_initial_eps=1.0, exploration_final_eps=0.1,
                                   max_grad_norm=10.0, policy_kwargs=RELU_256)),
}  # fmt: skip


def _config(spec: bench.EnvSpec, *extra: str):
    return load_config(REPO / spec.config, [*bench.frugalrl_overrides(spec, 1, spec.timesteps), *extra])


@pytest.mark.parametrize("env_id", sorted(EXPECTED))
def test_each_config_maps_to_rl_zoos_sb3_arguments(env_id):
    import stable_baselines3

    spec = bench.ENVS[env_id]
    algo, kwargs, described = bench.sb3_settings(_config(spec))
    assert (algo, kwargs) == EXPECTED[env_id]
    assert described["n_envs"] == 1 and described["policy_kwargs"]["activation_fn"] == "nn.ReLU"
    accepted = inspect.signature(getattr(stable_baselines3, algo).__init__).parameters
    assert set(kwargs) <= set(accepted)


def test_the_frugalrl_side_turns_double_dqn_off_and_sb3_refuses_what_it_has_no_counterpart_for():
    cartpole, pendulum = bench.ENVS["CartPole-v1"], bench.ENVS["Pendulum-v1"]
    assert "dqn.double=false" in bench.frugalrl_overrides(cartpole, 1, 1000)
    assert not any(o.startswith("dqn.") for o in bench.frugalrl_overrides(pendulum, 1, 1000))
    with pytest.raises(ValueError, match="dqn.double"):
        bench.sb3_settings(load_config(REPO / cartpole.config))  # without the override: Double DQN
    for extra, refused in [
        ("sac.log_std_bounds=[-5, 2]", "log_std_bounds"),
        ("env.normalize_obs=true", "normalize"),
        ("policy.ortho_init=true", "ortho_init"),
        ("replay.kind=prioritized", "replay kind"),
        ("policy.activation=tanh", "activation"),
    ]:
        with pytest.raises(ValueError, match=refused):
            bench.sb3_settings(_config(pendulum, extra))
    with pytest.raises(ValueError, match="exploration boltzmann"):
        bench.sb3_settings(_config(cartpole, "dqn.exploration=boltzmann"))


def _rows(spec: bench.EnvSpec, fr_s: list[float], sb_s: list[float], fr_ret: float, sb_ret: float) -> list[dict]:
    common = {"env": spec.env_id, "algo": spec.algo, "timesteps": spec.timesteps, "batch": "b1", "git_commit": "abc",
              "command": "python -m benchmarks.offpolicy_vs_sb3", "machine": {"nproc": 2, "cpu": "CPU", "gpu": "none"},
              "versions": {"torch": "2"}, "load_before": "1.00 / 1.00 / 1.00", "load_after": "1.00 / 1.00 / 1.00",
              "torch_threads": 1, "env_steps": spec.timesteps, "eval_episodes": spec.eval_episodes}  # fmt: skip
    rows = []
    for seed, (a, b) in enumerate(zip(fr_s, sb_s, strict=True), start=1):
        split = {"env_s": 0.1 * a, "act_s": 0.2 * a, "learn_s": 0.5 * a, "eval_s": 1.0, "wall_s": a + 1.0}
        rows.append({**common, "seed": seed, "contender": "frugalrl", "train_s": a, "learn_call_s": None,
                     "train_cpu_s": a, "time_split": split, "gradient_steps": 19_900, "eval_mean": fr_ret + seed,
                     "settings": {"config": spec.config, "overrides": bench.frugalrl_overrides(spec, seed, 20_000)},
                     "timestamp": f"2026-01-01T00:0{seed}:00Z"})  # fmt: skip
        rows.append({**common, "seed": seed, "contender": "sb3", "train_s": b, "learn_call_s": b - 1.0,
                     "train_cpu_s": b, "time_split": None, "gradient_steps": 19_900, "eval_mean": sb_ret + seed,
                     "settings": {"SAC": "MlpPolicy", "n_envs": 1, "learning_rate": 1e-3},
                     "timestamp": f"2026-01-01T00:0{seed}:30Z"})  # fmt: skip
    return rows


def test_the_verdict_checks_the_issue_targets_and_flips_where_the_figures_cross_them():
    spec = bench.ENVS["Pendulum-v1"]  # SAC: at most 0.7x SB3's time, median return at least SB3's lowest seed
    faster = bench.render(spec, _rows(spec, [60.0, 70.0, 80.0], [100.0, 120.0, 130.0], -150.0, -160.0), 20_000)
    assert "at most 0.7 (median of per-seed ratios)" in faster and "Overall: met.**" in faster
    assert "median of per-seed ratios 0.60" in faster and "ratio of medians 0.58" in faster
    assert "median eval return frugalrl -148.0 vs SB3 -158.0 (SB3 -159.0 to -157.0): met" in faster
    # every seed 10 higher: the paired interval is [+10, +10], it does not hold 0
    assert "paired difference +10.0, 95% interval [+10.0, +10.0]: the returns differ" in faster
    assert "| training wall-clock, s | 70.0 (60.0-80.0) | 120.0 (100.0-130.0) | 0.58 | 0.60 (0.58-0.62) |" in faster
    assert "| 1 | 60.0 | 100.0 (99.0) | 0.60 |" in faster
    assert "other 14.0 (12.0-16.0)" in faster  # training s minus env / act / learn

    # faster than SB3, but not 0.7x: missed
    slower = bench.render(spec, _rows(spec, [90.0, 100.0, 110.0], [100.0, 120.0, 130.0], -150.0, -160.0), 20_000)
    assert "Overall: missed.**" in slower and "median of per-seed ratios 0.85" in slower
    # SAC: below SB3's median but within its spread still meets the return half
    within = bench.render(spec, _rows(spec, [60.0, 70.0, 80.0], [100.0, 120.0, 130.0], -160.5, -160.0), 20_000)
    assert "-158.5 vs SB3 -158.0 (SB3 -159.0 to -157.0): met" in within and "Overall: met.**" in within
    worse = bench.render(spec, _rows(spec, [60.0, 70.0, 80.0], [100.0, 120.0, 130.0], -170.0, -160.0), 20_000)
    assert "median eval return frugalrl -168.0 vs SB3 -158.0 (SB3 -159.0 to -157.0): missed" in worse
    assert "Overall: missed.**" in worse
    assert "not a check of the target" in bench.render(spec, _rows(spec, [1.0], [2.0], 0.0, 0.0), 600)
    two = bench.render(spec, _rows(spec, [60.0, 70.0], [100.0, 120.0], -150.0, -160.0), 20_000)
    assert "paired difference +10.0 over 2 pairs: too few pairs for an interval" in two and "95% interval" not in two


def test_dqn_needs_half_the_time_and_the_median_return():
    spec = bench.ENVS["CartPole-v1"]
    half = bench.render(spec, _rows(spec, [50.0, 60.0, 40.0], [100.0, 120.0, 90.0], 100.0, 100.0), 50_000)
    assert "at most 0.5 (median of per-seed ratios)" in half and "Overall: met.**" in half
    assert "paired difference +0.0, 95% interval [+0.0, +0.0]: these seeds do not tell the returns apart" in half
    lower = bench.render(spec, _rows(spec, [50.0, 60.0, 40.0], [100.0, 120.0, 90.0], 99.5, 100.0), 50_000)
    assert "Overall: missed.**" in lower  # DQN: the median, not the spread


def test_resume_skips_the_runs_the_newest_batch_holds_and_joins_it(tmp_path, monkeypatch):
    spec = bench.ENVS["CartPole-v1"]
    results = tmp_path / "rows.jsonl"
    for row in _rows(spec, [1.0], [2.0], 100.0, 100.0):
        _report.append_row(results, row)
    ran = []

    def worker(module, args):
        ran.append((args[5], args[1]))  # (seed, contender)
        return {"train_s": 1.0, "train_cpu_s": 1.0, "eval_mean": 1.0, "env_steps": 1, "gradient_steps": 1}

    monkeypatch.setattr(bench._harness, "worker", worker)
    rows = bench.run_env(spec, spec.timesteps, [1, 2], {"batch": "new"}, results, resume=True)
    assert ran == [(2, "frugalrl"), (2, "sb3")]
    assert [(r["seed"], r["contender"], r["batch"]) for r in rows] == [
        (1, "frugalrl", "b1"), (1, "sb3", "b1"), (2, "frugalrl", "b1"), (2, "sb3", "b1")
    ]  # fmt: skip
    ran.clear()
    bench.run_env(spec, spec.timesteps, [1], {"batch": "new"}, results, resume=False)
    assert ran == [(1, "frugalrl"), (1, "sb3")]


def test_report_only_without_rows_prints_the_no_rows_text(tmp_path, monkeypatch, capsys):
    argv = ["offpolicy_vs_sb3.py", "--report-only", "--env", "Pendulum-v1", "--results", str(tmp_path / "none.jsonl")]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    assert _report.no_rows("offpolicy_vs_sb3") in capsys.readouterr().out.replace("\n", " ")


def test_the_step_floor_records_each_matrix_product_and_replays_it():
    import torch

    from benchmarks.offpolicy_step_floor import MatmulLog
    from frugalrl.cost import count_flops

    x, w, b = torch.randn(5, 3), torch.randn(4, 3), torch.randn(4)
    batched = torch.randn(2, 5, 3), torch.randn(2, 3, 6)
    log = MatmulLog()

    shared = x.unsqueeze(0).expand(2, -1, -1)  # one input read by two stacked layers (SAC's twin critics)

    def call():
        return torch.nn.functional.linear(x, w, b), torch.bmm(*batched), torch.relu(x), torch.bmm(shared, batched[1])

    log.record(call)
    assert [func.overloadpacket.__name__ for func, _, _ in log.calls] == ["addmm", "bmm", "bmm"]  # relu is not one
    assert count_flops(call)[0] == 2 * 5 * 3 * 4 + 2 * (2 * 2 * 5 * 3 * 6)  # the FLOPs the script records
    _, operands, _ = log.calls[0]
    assert operands[2][1:3] == ((3, 4), (1, 3))  # the transposed weight keeps its layout
    assert log.calls[2][1][0][1:3] == ((2, 5, 3), (0, 3, 1))  # and the expanded input its stride 0
    log.replay()()  # runs on random operands of those layouts
