"""The PPO minibatch step kinds (``ppo.compile``): same numbers as eager autograd, same optimizer."""

from __future__ import annotations

import copy

import gymnasium as gym
import pytest
import torch

from frugalrl.algos.fused_mlp import FusedMLPStep, fused_unsupported
from frugalrl.algos.optim_step import ClipAndStep
from frugalrl.algos.ppo_step import EagerStep, Minibatch
from frugalrl.algos.step_kinds import make_step
from frugalrl.config import PolicyConfig, PPOConfig

from .conftest import tiny_config

OBS = gym.spaces.Box(-1, 1, (5,))


def _policy(discrete: bool, activation: str = "tanh", seed: int = 0, standardised: bool = False) -> torch.nn.Module:
    from frugalrl.nets.policy import InputStandardiser, build_actor_critic

    torch.manual_seed(seed)
    action_space = gym.spaces.Discrete(3) if discrete else gym.spaces.Box(-1, 1, (2,))
    # an offset and a spread to undo, and inputs far enough out that some are clipped
    norm = InputStandardiser.fit(0.3 + 0.5 * torch.randn(256, 5), clip=2.0) if standardised else None
    policy = build_actor_critic(OBS, action_space, PolicyConfig(hidden=[32, 16], activation=activation), norm)
    with torch.no_grad():  # move away from the near-zero head init so every term has a gradient
        for p in policy.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return policy


def _minibatch(policy: torch.nn.Module, discrete: bool, weighted: bool, k: int = 96) -> Minibatch:
    obs = torch.randn(k, 5)
    actions = torch.randint(0, 3, (k,)) if discrete else torch.randn(k, 2)
    with torch.no_grad():
        old = policy.evaluate(obs, actions)[0] + 0.3 * torch.randn(k)  # ratios on both sides of the clip
    weights = torch.rand(k) * 3 if weighted else None
    return Minibatch(
        obs, actions, old, torch.randn(k), torch.randn(k), torch.randn(k), weights, 130.0 if weighted else k
    )


@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("clip_vloss", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("standardised", [False, True])
def test_fused_step_matches_autograd(discrete, activation, clip_vloss, weighted, standardised):
    policy = _policy(discrete, activation, standardised=standardised)
    hp = PPOConfig(ent_coef=0.01, vf_coef=0.7, clip_vloss=clip_vloss)
    mb = _minibatch(policy, discrete, weighted)
    results = []
    for kind in (EagerStep, FusedMLPStep):
        net = copy.deepcopy(policy)
        step = kind(net, hp)
        out = step.forward(mb, clip=0.2)
        step.backward(out)
        results.append((out.loss.detach(), out.stats, [p.grad.clone() for p in net.parameters()]))
    (loss_a, stats_a, grads_a), (loss_b, stats_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(stats_b, stats_a, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads_b, grads_a, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-8)


@pytest.mark.parametrize("standardised", [False, True])
def test_fused_act_samples_like_the_module(standardised):
    """The NumPy acting path: same distribution parameters and values, same random draws, same actions."""
    policy = _policy(True, standardised=standardised)
    step = FusedMLPStep(policy, PPOConfig())
    obs = torch.randn(16, 5)
    torch.manual_seed(7)
    fused = step.act(obs)
    torch.manual_seed(7)
    with torch.no_grad():
        module = policy.act(obs)
    assert torch.equal(fused.action, module.action)
    for got, want in zip(fused[1:], module[1:], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_clip_and_step_is_exactly_clip_grad_norm_and_adam():
    policy = _policy(True)
    twin = copy.deepcopy(policy)
    params, twin_params = list(policy.parameters()), list(twin.parameters())
    ours = ClipAndStep(torch.optim.Adam(params, lr=3e-3, eps=1e-5, fused=True), params)
    theirs = torch.optim.Adam(twin_params, lr=3e-3, eps=1e-5, fused=True)
    assert ours.direct
    for i in range(6):
        grads = [torch.randn_like(p) * (10 if i % 2 else 0.01) for p in params]  # clipped and not clipped
        ours.zero_grad()
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        ours.step(0.5)
        theirs.zero_grad()
        for p, g in zip(twin_params, grads, strict=True):
            p.grad = g.clone()
        torch.nn.utils.clip_grad_norm_(twin_params, 0.5)
        theirs.step()
        for a, b in zip(params, twin_params, strict=True):
            assert torch.equal(a, b)
    state = theirs.state_dict()
    ours.optimizer.load_state_dict(state)  # a resume replaces the state: the next step must see it
    for p in params:
        p.grad = torch.ones_like(p)
    ours.step(0.5)
    assert int(ours.optimizer.state[params[0]]["step"]) == 7


def test_fused_falls_back_with_one_line_where_it_cannot_run(caplog):
    from frugalrl.nets.policy import build_actor_critic

    pixels = gym.spaces.Box(0, 255, (4, 84, 84), dtype="uint8")
    cnn = build_actor_critic(pixels, gym.spaces.Discrete(4), PolicyConfig())
    assert "share a torso" in fused_unsupported(cnn)
    assert make_step("auto", cnn, PPOConfig(), torch.device("cpu")).mode == "off"
    with caplog.at_level("WARNING"):
        assert make_step("fused", cnn, PPOConfig(), torch.device("cpu")).mode == "off"
    assert len(caplog.records) == 1 and "fused is not possible here" in caplog.records[0].getMessage()
    fractal = build_actor_critic(OBS, gym.spaces.Discrete(2), PolicyConfig(hidden=[16, 16], block="fractal"))
    assert "fractal" in fused_unsupported(fractal)


def test_yaml_on_and_off_read_as_the_switch():
    import yaml

    for text, mode in (("off", "off"), ("on", "fused"), ("auto", "auto"), ("inductor", "inductor")):
        value = yaml.safe_load(f"compile: {text}")["compile"]
        assert PPOConfig(compile=value).compile == mode


def test_summary_reports_the_step_and_optimizer_steps(tmp_path):
    from frugalrl.training import train

    fused = train(tiny_config(), tmp_path / "fused", interactive=False)
    eager = train(tiny_config(ppo={"compile": "off"}), tmp_path / "eager", interactive=False)
    assert fused["compile"] == "fused" and eager["compile"] == "off"
    # 1024 steps / (4 envs x 32) = 8 updates, 2 epochs of 128 / 64 = 2 minibatches
    assert fused["optimizer_steps"] == eager["optimizer_steps"] == 8 * 2 * 2
    assert fused["backward_samples"] == eager["backward_samples"]
    # Same random draws and the same math up to float rounding: the runs stay close.
    assert abs(fused["eval_mean"] - eager["eval_mean"]) <= 0.25 * max(eager["eval_mean"], 1.0) + 5


def test_fused_and_eager_updates_agree_over_a_few_updates():
    """One learner per kind from the same start, same rollouts: parameters stay within float tolerance."""
    from frugalrl.algos.ppo import PPO
    from frugalrl.cost import CostMeter
    from frugalrl.envs import make_vec_env

    learners = []
    for mode in ("off", "fused"):
        config = tiny_config(ppo={"compile": mode})
        torch.manual_seed(0)
        agent = PPO(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"))
        agent.start(0)
        learners.append(agent)
    for _ in range(3):
        for agent in learners:
            torch.manual_seed(agent.update)
            agent.run_update()
    eager, fused = learners
    assert eager.step.mode == "off" and fused.step.mode == "fused"
    for a, b in zip(eager.policy.parameters(), fused.policy.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_inductor_step_matches_eager_and_trains(tmp_path):
    """torch.compile (inductor, C++ on CPU): same loss and gradient as eager; a short run finishes."""
    from frugalrl.algos.ppo_step import InductorStep, inductor_available

    if inductor_available() is not None:
        pytest.skip(f"inductor cannot build here: {inductor_available()}")
    policy = _policy(True)
    mb = _minibatch(policy, True, weighted=False)
    grads = []
    for kind in (EagerStep, InductorStep):
        net = copy.deepcopy(policy)
        step = kind(net, PPOConfig(ent_coef=0.01))
        step.backward(step.forward(mb, clip=0.2))
        grads.append([p.grad for p in net.parameters()])
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
