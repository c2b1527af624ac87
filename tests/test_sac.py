"""SAC: the squashed-Gaussian log-probability, a short run through the run contract, export and reload."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform, TanhTransform

from frugalrl.algos.sac import SAC, SquashedGaussianActor
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.policy_store import load_policy_file
from frugalrl.training import train

from .conftest import tiny_config


def sac_config(**sections):
    base = {
        "algo": "sac",
        "env": {"id": "Pendulum-v1", "num_envs": 1},
        "policy": {"hidden": [32, 32], "ortho_init": False},
        "sac": {"total_timesteps": 400, "learning_starts": 100, "batch_size": 32},
        "replay": {"capacity": 2000},
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return tiny_config(**base)


def test_squashed_gaussian_log_prob_matches_torch_distributions():
    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32), dtype=np.float32)
    actor = SquashedGaussianActor(3, space, [16], (-20.0, 2.0))
    obs = torch.randn(64, 3)
    torch.manual_seed(0)
    action, logprob = actor.sample(obs)
    h = actor.torso(obs)
    mean, std = actor.mean(h), actor.log_std(h).clamp(-20, 2).exp()
    dist = TransformedDistribution(Normal(mean, std), [TanhTransform(), AffineTransform(actor.bias, actor.scale)])
    torch.testing.assert_close(logprob, dist.log_prob(action.clamp(-1.999999, 1.999999)).sum(-1), atol=2e-3, rtol=1e-3)
    assert (action[:, 0].abs() <= 2).all() and (action[:, 1] >= 0).all() and (action[:, 1] <= 1).all()


def test_acting_skips_the_log_prob_but_takes_the_same_random_draw():
    """``sample_action`` (acting, serving) takes the same random draw as ``sample`` and returns its actions."""
    space = gym.spaces.Box(-np.ones(2, np.float32), 3 * np.ones(2, np.float32), dtype=np.float32)
    actor = SquashedGaussianActor(3, space, [16], (-20.0, 2.0))
    obs = torch.randn(8, 3)
    torch.manual_seed(1)
    expected, after_sample = actor.sample(obs)[0], torch.randn(1)
    torch.manual_seed(1)
    drawn, after_action = actor.sample_action(obs), torch.randn(1)
    # The same actions, and the same draws consumed: a run's random stream does not move.
    assert torch.equal(drawn, expected) and torch.equal(after_action, after_sample)
    assert torch.equal(actor(obs), actor.sample(obs, deterministic=True)[0])
    assert not torch.equal(actor.sample_action(obs), actor.sample_action(obs))  # stochastic unless deterministic


@pytest.mark.slow
def test_sac_run_writes_the_contract_and_reloads(tmp_path):
    summary = train(sac_config(replay={"kind": "prioritized"}), tmp_path / "run")
    assert summary["algo"] == "sac" and summary["real_env_steps"] == 400
    assert summary["backward_samples"] > 0 and summary["train_flops"] > 0
    assert summary["techniques"] == ["replay_prioritized"]
    policy, config = load_policy_file(tmp_path / "run")
    action = policy.act(torch.zeros(2, 3))
    assert config.algo == "sac" and action.shape == (2, 1) and action.abs().max() <= 2.0


def test_sac_temperature_moves_toward_the_target_entropy():
    config = sac_config(sac={"total_timesteps": 600, "learning_starts": 64})
    agent = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    agent.start(0)
    alphas = [agent.run_update().get("alpha") for _ in range(600)]
    alphas = [a for a in alphas if a is not None]
    assert alphas[-1] != pytest.approx(1.0)  # auto-tuned away from its initial value
    with pytest.raises(ValueError, match="continuous"):
        SAC(sac_config(env={"id": "CartPole-v1"}), make_vec_env(sac_config(env={"id": "CartPole-v1"}).env),
            CostMeter(), torch.device("cpu"))  # fmt: skip


def test_fractal_blocks_reach_the_sac_actor_and_critics():
    from frugalrl.nets.torsos import FractalBlock

    config = sac_config(policy={"block": "fractal"})
    agent = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    assert any(isinstance(m, FractalBlock) for m in agent.policy.modules())
    assert sum(isinstance(m, FractalBlock) for m in agent.critic.modules()) == 2


def _learned(fused_adam: bool, fused_step: bool = True) -> SAC:
    config = sac_config(
        sac={"total_timesteps": 300, "learning_starts": 64, "fused_adam": fused_adam, "fused_step": fused_step}
    )
    agent = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    agent.start(0)
    for _ in range(120):
        agent.run_update()
    return agent


def test_the_actor_step_leaves_the_critics_trainable_and_their_gradients_uncomputed():
    """The actor's loss goes through the critics: autograd (``sac.fused_step: false``) computes a critic weight's
    gradient once per gradient step (the critic loss's), not twice, and the weights stay trainable; every actor
    weight moves."""
    agent = _learned(fused_adam=True, fused_step=False)
    computed = []
    hooks = [p.register_hook(lambda g, i=i: computed.append(i)) for i, p in enumerate(agent.critic.parameters())]
    actor_before = [p.detach().clone() for p in agent.policy.parameters()]
    agent.learn()  # one gradient step (sac.gradient_steps 1)
    for hook in hooks:
        hook.remove()
    assert sorted(computed) == list(range(len(hooks)))
    assert all(p.requires_grad for p in agent.critic.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(actor_before, agent.policy.parameters(), strict=True))


def test_fused_adam_is_the_reference_adam_up_to_rounding():
    """``sac.fused_adam: false`` is torch's default Adam; the fused kernel computes the same update (the two
    runs part only by float rounding, which grows slowly over updates)."""
    torch.manual_seed(0)
    fused = _learned(fused_adam=True)
    torch.manual_seed(0)
    reference = _learned(fused_adam=False)
    assert fused.actor_optimizer.param_groups[0]["fused"] and not reference.actor_optimizer.param_groups[0]["fused"]
    for a, b in zip(fused.critic.parameters(), reference.critic.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
