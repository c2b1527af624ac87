"""The fused DQN step (``frugalrl.algos.dqn_step``) against its autograd reference: the same gradients bit for bit,
so a run trains exactly as on the reference; networks it cannot run fall back to autograd."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from frugalrl.algos.dqn import DQN
from frugalrl.algos.dqn_step import AutogradQStep, FusedQStep, build_q_step, fused_unsupported
from frugalrl.config import PolicyConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.nets.qnet import build_q_network

from .test_dqn import dqn_config


def _net(hidden: list[int], activation: str, **extra):
    return build_q_network(
        gym.spaces.Box(-1, 1, (6,)), gym.spaces.Discrete(3), PolicyConfig(hidden=hidden, activation=activation, **extra)
    )


def _step(step, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    obs, targets = torch.randn(batch, 6, generator=gen), 3 * torch.randn(batch, generator=gen)  # Huber: both arms
    actions, weights = torch.randint(0, 3, (batch,), generator=gen), torch.rand(batch, generator=gen)
    q = step.forward(obs, actions)
    loss = (weights * F.smooth_l1_loss(q, targets, reduction="none")).mean()
    step.backward(loss, q, targets, weights)
    return q.detach(), loss.detach()


@pytest.mark.parametrize("hidden, activation", [([256, 256], "relu"), ([16, 8, 5], "tanh"), ([7], "relu")])
def test_fused_gradients_are_autograds_bit_for_bit(hidden, activation):
    net = _net(hidden, activation, ortho_init=False)
    twin = copy.deepcopy(net)
    reference, fused = AutogradQStep(net), FusedQStep(twin)
    for seed, batch in enumerate([37, 128]):  # not a power of two: 1 / B rounds
        for p in [*net.parameters(), *twin.parameters()]:
            p.grad = None
        (q_ref, loss_ref), (q, loss) = _step(reference, batch, seed), _step(fused, batch, seed)
        assert torch.equal(q_ref, q) and torch.equal(loss_ref, loss)
        for (name, a), b in zip(net.named_parameters(), twin.parameters(), strict=True):
            assert torch.equal(a.grad, b.grad), f"{name}: {(a.grad - b.grad).abs().max().item()}"


def test_a_run_trains_exactly_as_on_the_reference():
    agents = {}
    for fused in (True, False):
        config = dqn_config(dqn={"fused_step": fused})
        torch.manual_seed(config.seed)  # the same initial network
        agent = DQN(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
        agent.start(config.seed)
        metrics = [agent.run_update() for _ in range(60)]  # learning starts after 13 updates of 16 env steps
        agents[fused] = (agent, metrics)
    (fast, fast_metrics), (ref, ref_metrics) = agents[True], agents[False]
    assert isinstance(fast.q_step, FusedQStep) and isinstance(ref.q_step, AutogradQStep)
    assert [m.get("loss") for m in fast_metrics] == [m.get("loss") for m in ref_metrics]
    assert fast_metrics[-1]["loss"] is not None
    for (name, a), b in zip(fast.policy.state_dict().items(), ref.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert fast.meter.flops_per_sample == ref.meter.flops_per_sample  # the same products, counted alike


def test_networks_the_fused_step_cannot_run_take_autograd():
    fractal = _net([32, 32], "relu", block="fractal")
    assert "not Linear + ReLU/Tanh" in fused_unsupported(fractal)
    assert isinstance(build_q_step(fractal, fused=True), AutogradQStep)
    cnn = build_q_network(gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8), gym.spaces.Discrete(3), PolicyConfig())
    assert "not a plain MLP" in fused_unsupported(cnn)
    with pytest.raises(ValueError, match="cannot run this network"):
        FusedQStep(cnn)
    assert isinstance(build_q_step(_net([8], "relu"), fused=False), AutogradQStep)
    frozen = _net([8], "relu")
    frozen.torso.requires_grad_(False)
    assert "frozen" in fused_unsupported(frozen)
    with pytest.raises(RuntimeError, match="forward"):
        FusedQStep(_net([8], "relu")).backward(torch.zeros(()), torch.zeros(2), torch.zeros(2), torch.ones(2))
