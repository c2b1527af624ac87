"""Evaluation statistics and fixed-seed evaluation of a real policy."""

from __future__ import annotations

import numpy as np

from frugalrl.evaluation import EvalResult, bootstrap_ci, evaluate_policy, interquartile_mean
from frugalrl.nets.policy import ExportedPolicy, build_actor_critic

from .conftest import tiny_config


def test_iqm_drops_the_tails():
    values = np.array([0, 1, 2, 3, 4, 5, 6, 100.0])
    assert interquartile_mean(values) == np.mean([2, 3, 4, 5])


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_more_data():
    rng = np.random.default_rng(0)
    small, large = rng.normal(10, 3, 10), rng.normal(10, 3, 1000)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    assert hi_l - lo_l < hi_s - lo_s


def test_result_metrics_have_the_contract_keys():
    metrics = EvalResult.from_returns([1.0, 2.0, 3.0], [10, 20, 30]).metrics()
    assert metrics["eval_mean"] == 2.0 and metrics["eval_episodes"] == 3
    assert {"eval_std", "eval_iqm", "eval_ci_low", "eval_ci_high"} <= set(metrics)


def _random_policy(config):
    import gymnasium as gym

    net = build_actor_critic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), config.policy)
    return ExportedPolicy(net, spec={"env": config.env.model_dump(mode="json")})


def test_evaluation_is_reproducible_over_fixed_seeds():
    config = tiny_config()
    policy = _random_policy(config)
    a = evaluate_policy(policy, config.env, episodes=7, seed=123, batch=3)
    b = evaluate_policy(policy, config.env, episodes=7, seed=123, batch=5)
    assert len(a.returns) == 7
    assert a.returns == b.returns  # episode i always uses seed 123 + i, however it is batched
    c = evaluate_policy(policy, config.env, episodes=7, seed=999)
    assert c.returns != a.returns
