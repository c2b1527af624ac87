"""Fixed-seed evaluation of a real policy and the figures it reports (the statistics: test_stats.py)."""

from __future__ import annotations

from frugalrl.evaluation import EvalResult, evaluate_policy
from frugalrl.nets.policy import ExportedPolicy, build_actor_critic

from .conftest import tiny_config


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
