"""The written-out SAC step (``frugalrl.algos.sac_step``) against its autograd reference: the same targets, critic
and actor gradients up to float rounding, from the same random draws; networks it cannot run fall back to
autograd."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from frugalrl.algos.sac import SAC, SACNetworks
from frugalrl.algos.sac_step import AutogradSACStep, FusedSACStep, build_sac_step, fused_unsupported
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env

from .test_sac import sac_config

OBS = 5


def _networks(hidden: list[int], action_dim: int, **policy) -> tuple:
    """Actor, critic and target critic (the target a little off the critic, as after some updates)."""
    low = np.linspace(-2.0, 0.0, action_dim).astype(np.float32)
    space = gym.spaces.Box(low, low + np.linspace(1.0, 4.0, action_dim).astype(np.float32), dtype=np.float32)
    # bounds (-5, 2): at the default lower bound (std = 2e-9) mean + std * noise rounds to mean in float32, and
    # the reference's ((pre - mean) / std)^2 loses the noise the written-out step squares directly
    config = sac_config(policy={"hidden": hidden, **policy}, sac={"log_std_bounds": (-5.0, 2.0)})
    torch.manual_seed(0)
    nets = SACNetworks.build(gym.spaces.Box(-1, 1, (OBS,)), space, config)
    target = copy.deepcopy(nets.critic).requires_grad_(False)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(0.01 * torch.randn_like(p))
        # a wide log-std head centred on the lower bound: some samples fall outside the clamp (gradient zero)
        nets.actor.log_std.weight.mul_(30.0)
        nets.actor.log_std.bias.fill_(-5.0)
    return nets.actor, nets.critic, target


def _batch(batch: int, action_dim: int, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(batch, OBS, generator=gen),
        "actions": torch.rand(batch, action_dim, generator=gen) * 2 - 1,
        "rewards": torch.randn(batch, generator=gen),
        "next_obs": torch.randn(batch, OBS, generator=gen),
        "terminated": (torch.rand(batch, generator=gen) < 0.2).float(),
        "weights": torch.rand(batch, generator=gen),
    }


def _one_step(step, b: dict, alpha: torch.Tensor, seed: int) -> dict:
    """What a gradient step computes: targets, Q values, the critic and actor gradients, the actor's loss."""
    torch.manual_seed(seed)  # the policy's noise
    targets = step.targets(b["next_obs"], b["rewards"], b["terminated"], 0.99, alpha)
    q1, q2 = step.critic_forward(b["obs"], b["actions"])
    loss = (b["weights"] * ((q1 - targets) ** 2 + (q2 - targets) ** 2)).mean() / 2
    step.critic_backward(loss, q1, q2, targets, b["weights"])
    actor_loss, logprob = step.actor_backward(b["obs"], alpha)
    return {"targets": targets, "q": torch.stack([q1, q2]).detach(), "critic_loss": loss.detach(),
            "actor_loss": actor_loss, "logprob": logprob}  # fmt: skip


@pytest.mark.parametrize("hidden, action_dim, batch", [([256, 256], 6, 256), ([16, 8, 5], 1, 37), ([7], 2, 64)])
def test_the_written_out_step_computes_autograds_numbers(hidden, action_dim, batch):
    actor, critic, target = _networks(hidden, action_dim)
    twins = tuple(copy.deepcopy(n) for n in (actor, critic, target))
    reference, fused = AutogradSACStep(actor, critic, target), FusedSACStep(*twins)
    alpha = torch.tensor([0.3])
    for seed in range(2):
        for p in [*actor.parameters(), *critic.parameters(), *twins[0].parameters(), *twins[1].parameters()]:
            p.grad = None
        b = _batch(batch, action_dim, seed)
        ref, got = _one_step(reference, b, alpha, seed), _one_step(fused, b, alpha, seed)
        for key in ("targets", "q", "critic_loss", "actor_loss", "logprob"):
            torch.testing.assert_close(got[key], ref[key], rtol=1e-5, atol=1e-5, msg=key)
        # the critics' .grad hold the critic loss's gradient alone: the actor's pass adds none on either side
        for net, twin in ((critic, twins[1]), (actor, twins[0])):
            for (name, a), f in zip(net.named_parameters(), twin.parameters(), strict=True):
                torch.testing.assert_close(f.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)
    clamped = actor.log_std(actor.torso(b["obs"])).detach()
    assert ((clamped < -5) | (clamped > 2)).any() and ((clamped > -5) & (clamped < 2)).any()  # both branches ran


def test_tied_critics_share_the_actors_gradient_as_torch_minimum_does():
    actor, critic, target = _networks([8], 1)
    critic.q2.load_state_dict(critic.q1.state_dict())  # Q1 == Q2 everywhere: every sample is a tie
    twins = tuple(copy.deepcopy(n) for n in (actor, critic, target))
    b = _batch(16, 1, 0)
    for step in (AutogradSACStep(actor, critic, target), FusedSACStep(*twins)):
        torch.manual_seed(3)
        step.actor_backward(b["obs"], torch.tensor([0.1]))
    for a, f in zip(actor.parameters(), twins[0].parameters(), strict=True):
        torch.testing.assert_close(f.grad, a.grad, rtol=1e-4, atol=1e-6)


def test_a_run_trains_as_on_the_reference_up_to_rounding():
    agents = {}
    for fused in (True, False):
        config = sac_config(sac={"total_timesteps": 300, "learning_starts": 64, "fused_step": fused})
        torch.manual_seed(config.seed)  # the same initial networks
        agent = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
        agent.start(config.seed)
        metrics = [agent.run_update() for _ in range(100)]
        agents[fused] = (agent, metrics)
    (fast, fast_metrics), (ref, ref_metrics) = agents[True], agents[False]
    assert isinstance(fast.step, FusedSACStep) and isinstance(ref.step, AutogradSACStep)
    losses = [(m["critic_loss"], r["critic_loss"]) for m, r in zip(fast_metrics, ref_metrics, strict=True)
              if m.get("critic_loss") is not None]  # fmt: skip
    assert len(losses) >= 30
    np.testing.assert_allclose(*zip(*losses, strict=True), rtol=1e-3)
    for (name, a), b in zip(fast.policy.state_dict().items(), ref.policy.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=name)
    assert fast.meter.flops_per_sample.keys() == ref.meter.flops_per_sample.keys()


def test_a_fused_learner_reads_the_weights_a_checkpoint_loads(tmp_path):
    """The critics' weights live in stacked storage: loading a checkpoint writes into it, so the step computes
    with the loaded weights, and the checkpoint holds ordinary parameters."""
    config = sac_config(sac={"total_timesteps": 300, "learning_starts": 32})
    agent = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    agent.start(config.seed)
    for _ in range(50):
        agent.run_update()
    torch.save(agent.state_dict(), tmp_path / "state.pt")
    resumed = SAC(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=False))
    assert isinstance(resumed.step, FusedSACStep)
    obs, actions = torch.randn(9, 3), torch.rand(9, 1)
    for learner in (agent, resumed):
        with torch.no_grad():
            torch.testing.assert_close(torch.stack(learner.step.critic_forward(obs, actions)),
                                       torch.stack(agent.critic(obs, actions)))  # fmt: skip
            next_q = learner.step.critic_target.forward(torch.cat([obs, actions], dim=-1))[-1].squeeze(-1)
            torch.testing.assert_close(next_q, torch.stack(agent.critic_target(obs, actions)))


def test_networks_the_written_out_step_cannot_run_take_autograd():
    actor, critic, target = _networks([16, 16], 2, block="fractal")
    assert "not Linear + activation pairs" in fused_unsupported(actor, critic, target)
    assert isinstance(build_sac_step(actor, critic, target, fused=True), AutogradSACStep)
    with pytest.raises(ValueError, match="cannot run these networks"):
        FusedSACStep(actor, critic, target)
    actor, critic, target = _networks([8], 1)
    assert isinstance(build_sac_step(actor, critic, target, fused=False), AutogradSACStep)
    actor.torso.requires_grad_(False)  # a PEFT method freezes what it does not adapt
    assert "frozen" in fused_unsupported(actor, critic, target)
    with pytest.raises(RuntimeError, match="critic_forward"):
        FusedSACStep(*_networks([8], 1)).critic_backward(*(torch.zeros(2),) * 5)
