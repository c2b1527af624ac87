"""PivotRL: the scheduler's rule, the safety margin, real skipping, unbiased re-weighting, labels, evaluator I/O."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from frugalrl.config import PivotConfig
from frugalrl.cost import CostMeter
from frugalrl.nets.policy import build_actor_critic
from frugalrl.pivot import ImportanceSelector, adapt_to, build_evaluator, load_evaluator, save_evaluator
from frugalrl.pivot.labels import compute_labels, grad_norm_label, rank_normalize, spearman

from .conftest import tiny_config

OBS = gym.spaces.Box(-1, 1, (4,))


def _selector(**pivot) -> ImportanceSelector:
    config = PivotConfig(**{"warmup_steps": 0, "threshold_boost": 0.0, **pivot})
    policy = build_actor_critic(OBS, gym.spaces.Discrete(2), tiny_config().policy)
    return ImportanceSelector(config, build_evaluator(OBS, [8]), policy, CostMeter(), torch.device("cpu"))


SCORES = torch.tensor([0.95, 0.85, 0.81, 0.79, 0.70, 0.55, 0.50, 0.49, 0.20, 0.05])


def test_rule_keeps_exactly_what_it_says():
    selector = _selector(high=0.8, low=0.5, keep_prob=1.0, min_full_fraction=0.0, p_min=0.0)
    selector.scores = SCORES
    chosen = selector.choose(torch.arange(10), step=10**6)
    assert chosen.indices.tolist() == [0, 1, 2, 3, 4, 5, 6]  # >= low kept (p = 1), < low skipped
    assert chosen.weights.tolist() == [1.0] * 7
    assert chosen.denominator == 7

    selector = _selector(high=0.8, low=0.5, keep_prob=0.5, min_full_fraction=0.0, p_min=0.0)
    selector.scores = SCORES
    torch.manual_seed(0)
    for _ in range(20):
        chosen = selector.choose(torch.arange(10), step=10**6)
        kept = chosen.indices.tolist()
        assert kept[:3] == [0, 1, 2]  # full compute always
        assert set(kept) <= {0, 1, 2, 3, 4, 5, 6}  # nothing below low, ever
        middle = chosen.weights[3:]
        assert torch.all(middle == 2.0)  # 1 / p
        assert chosen.denominator == 7  # full + middle band, however many were drawn


def test_unbiased_rule_keeps_the_low_band_with_inverse_weights():
    selector = _selector(high=0.8, low=0.5, keep_prob=1.0, min_full_fraction=0.0, p_min=0.25)
    selector.scores = SCORES
    torch.manual_seed(0)
    seen_low = 0
    for _ in range(200):
        chosen = selector.choose(torch.arange(10), step=10**6)
        assert chosen.indices.tolist()[:7] == list(range(7))
        low = chosen.indices >= 7
        seen_low += int(low.sum())
        assert torch.all(chosen.weights[low] == 4.0)  # 1 / p_min
        assert chosen.denominator == 10  # estimates the mean over every sample
    assert 0.15 < seen_low / (200 * 3) < 0.35


def test_safety_margin_promotes_the_highest_scores():
    selector = _selector(high=0.99, low=0.9, keep_prob=1.0, min_full_fraction=0.3, p_min=0.0)
    selector.scores = SCORES
    chosen = selector.choose(torch.arange(10), step=10**6)
    assert chosen.indices.tolist() == [0, 1, 2]  # none pass 0.99; the top 30% are promoted to full
    assert chosen.weights.tolist() == [1.0, 1.0, 1.0]


def test_warmup_and_dynamic_threshold():
    selector = _selector(warmup_steps=1000, low=0.5, high=0.8, threshold_boost=0.2, threshold_decay_steps=10_000)
    selector.scores = SCORES
    assert len(selector.choose(torch.arange(10), step=999).indices) == 10  # uniform during warm-up
    assert selector.thresholds(0) == pytest.approx((0.7, 0.8))
    assert selector.thresholds(5_000) == pytest.approx((0.6, 0.8))
    assert selector.thresholds(20_000) == pytest.approx((0.5, 0.8))


def test_biased_rule_reweighting_estimates_the_mean_over_kept_bands():
    """Toy loss l_i = x_i . theta: with p_min = 0 the estimate is the mean gradient over the non-skipped samples."""
    torch.manual_seed(1)
    x = torch.randn(10, 3)
    selector = _selector(high=0.8, low=0.5, keep_prob=0.3, min_full_fraction=0.0, p_min=0.0)
    selector.scores = SCORES
    target = x[:7].mean(0)  # full (0-2) and middle band (3-6)
    draws = torch.zeros(3)
    n = 20_000
    for _ in range(n):
        chosen = selector.choose(torch.arange(10), step=10**6)
        draws += (chosen.weights[:, None] * x[chosen.indices]).sum(0) / chosen.denominator
    torch.testing.assert_close(draws / n, target, atol=0.03, rtol=0.0)


def test_skipped_samples_get_no_gradient():
    from frugalrl.algos.ppo import PPO
    from frugalrl.envs import make_vec_env

    config = tiny_config(
        selection={"kind": "pivot", "settings": {"warmup_steps": 0, "refresh_every_updates": 0, "p_min": 0.0}}
    )
    torch.manual_seed(0)
    env = make_vec_env(config.env)
    agent = PPO(config, env, CostMeter(), torch.device("cpu"))
    evaluator = build_evaluator(OBS, [8])
    selector = ImportanceSelector(config.pivot, evaluator, agent.policy, agent.meter, torch.device("cpu"))
    agent.selector = selector
    agent.start(0)
    agent.collect_rollout()
    advantages, returns = agent.compute_advantages()
    scores = torch.linspace(0, 1, agent.rollout_size)
    skipped = scores < selector.thresholds(10**6)[0]

    def gradient(obs_noise: float) -> torch.Tensor:
        obs = agent.obs.reshape(-1, 4).clone()
        obs[skipped] += obs_noise  # change only what the rule skips
        agent.policy.zero_grad()
        torch.manual_seed(5)
        selector.scores = scores
        chosen = selector.choose(torch.arange(agent.rollout_size), step=10**6)
        assert not skipped[chosen.indices].any()
        logprob, _, value = agent.policy.evaluate(obs[chosen.indices], agent.actions.reshape(-1)[chosen.indices])
        loss = (chosen.weights * (logprob * advantages.reshape(-1)[chosen.indices] + value)).sum() / chosen.denominator
        loss.backward()
        return torch.cat([p.grad.flatten() for p in agent.policy.parameters() if p.grad is not None])

    torch.testing.assert_close(gradient(0.0), gradient(100.0), rtol=0, atol=0)


def test_pivot_training_really_skips_backward_compute(tmp_path):
    from frugalrl.training import train

    base = train(tiny_config(), tmp_path / "base", interactive=False)
    config = tiny_config(selection={"kind": "pivot", "settings": {"warmup_steps": 256, "threshold_boost": 0.0}})
    pivot = train(config, tmp_path / "pivot", interactive=False)
    assert pivot["techniques"] == ["pivot"]
    assert pivot["real_env_steps"] == base["real_env_steps"]
    assert pivot["backward_samples"] < 0.7 * base["backward_samples"]
    learner_flops = pivot["flops_per_sample"]["backward"] * pivot["backward_samples"]
    assert learner_flops < 0.7 * base["flops_per_sample"]["backward"] * base["backward_samples"]
    assert pivot["aux_flops"] > 0  # the evaluator's own cost is on the bill


def test_random_skip_control_keeps_its_fraction(tmp_path):
    from frugalrl.training import train

    config = tiny_config(selection={"kind": "random", "settings": {"keep_fraction": 0.25}})
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["techniques"] == ["random_skip"]
    assert summary["backward_samples"] == pytest.approx(0.25 * summary["real_env_steps"] * 2, rel=0.01)


def test_labels_rank_and_correlate():
    values = torch.tensor([3.0, 1.0, 2.0, 10.0])
    assert rank_normalize(values).tolist() == pytest.approx([2 / 3, 0.0, 1 / 3, 1.0])
    assert spearman(values, values * 2 + 1) == pytest.approx(1.0)
    assert spearman(values, -values) == pytest.approx(-1.0)


def test_grad_norm_label_matches_autograd_per_sample():
    torch.manual_seed(0)
    policy = build_actor_critic(OBS, gym.spaces.Discrete(2), tiny_config().policy)
    obs, actions, adv = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5)
    labels = grad_norm_label(policy, obs, actions, adv)
    for i in range(5):
        policy.zero_grad()
        logprob, _, _ = policy.evaluate(obs[i : i + 1], actions[i : i + 1])
        (adv[i] * logprob.sum()).backward()
        expected = torch.sqrt(sum((p.grad**2).sum() for p in policy.parameters() if p.grad is not None))
        assert labels[i].item() == pytest.approx(expected.item(), rel=1e-4)
    params, _ = policy(obs)
    proxy = compute_labels("policy_gradient", policy, obs, actions, adv, params.detach())
    assert spearman(proxy, labels) > 0.5  # the cheap proxy ranks states like the exact saliency


def test_evaluator_save_load_and_transfer(tmp_path):
    evaluator = build_evaluator(OBS, [16, 16])
    save_evaluator(tmp_path / "evaluator.pt", evaluator, {"task": "cartpole"})
    loaded = load_evaluator(tmp_path)
    obs = torch.randn(7, 4)
    torch.testing.assert_close(loaded(obs), evaluator(obs))
    assert torch.all((loaded(obs) >= 0) & (loaded(obs) <= 1))
    same, note = adapt_to(loaded, OBS)
    assert same is loaded and "all layers" in note
    other, note = adapt_to(loaded, gym.spaces.Box(-1, 1, (6,)))
    assert other(torch.randn(3, 6)).shape == (3,)
    assert "input layer re-initialised" in note
    torch.testing.assert_close(other.head[2].weight, loaded.head[2].weight)  # hidden layer carried over
    pixels = build_evaluator(gym.spaces.Box(0, 255, (4, 84, 84), dtype="uint8"), [32])
    assert pixels(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2,)


def test_bad_pivot_values_are_clear(tmp_path, capsys):
    import yaml

    from frugalrl.cli import main

    for data, fragment in [
        ({"selection": {"kind": "pivot", "settings": {"low": 0.9, "high": 0.8}}}, "low <= high"),
        ({"selection": {"kind": "pivot", "settings": {"keep_prob": 0.0}}}, "keep_prob: Input should be greater than 0"),
        ({"selection": {"kind": "pivot", "settings": {"keep_prob": 1.5}}}, "keep_prob: Input should be less than"),
        ({"selection": {"kind": "magic"}}, "selection.kind = 'magic'"),
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(SystemExit) as exit_info:
            main(["config", "validate", str(path)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and fragment in err, err


def _per_sample_gradients(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample PPO policy-gradient vectors of a small policy, and importance scores that rank them by norm."""
    torch.manual_seed(3)
    policy = build_actor_critic(OBS, gym.spaces.Discrete(2), tiny_config().policy)
    obs, actions, adv = torch.randn(n, 4), torch.randint(0, 2, (n,)), torch.randn(n)
    rows = []
    for i in range(n):
        policy.zero_grad()
        logprob, _, value = policy.evaluate(obs[i : i + 1], actions[i : i + 1])
        (-adv[i] * logprob.sum() + 0.5 * (value.sum() - adv[i]) ** 2).backward()
        rows.append(torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None]))
    grads = torch.stack(rows)
    return grads, rank_normalize(grads.norm(dim=1))  # the label ranks states by gradient size


@pytest.mark.parametrize("p_min", [0.1, 0.0])
def test_mean_selected_gradient_is_the_full_gradient(p_min):
    """Many selections on one fixed batch, packed into minibatches as training does: the unbiased rule's
    mean minibatch gradient is the full-batch gradient; the biased rule (p_min = 0) misses it by far."""
    from frugalrl.selection import pack

    grads, scores = _per_sample_gradients()
    full = grads.mean(0)
    selector = _selector(high=0.8, low=0.5, keep_prob=0.5, min_full_fraction=0.2, p_min=p_min)
    selector.scores = scores
    torch.manual_seed(0)
    total, draws = torch.zeros_like(full), 0
    for _ in range(3000):
        for mb in pack(selector.choose(torch.arange(len(grads)), step=10**6), batch_size=16):
            total += (mb.weights[:, None] * grads[mb.indices]).sum(0) / mb.denominator
            draws += 1
    error = float((total / draws - full).norm() / full.norm())
    if p_min > 0:
        assert error < 0.05, f"unbiased rule: mean selected gradient off by {error:.1%}"
    else:
        assert error > 0.3, f"the biased rule should miss the full gradient; it was off by only {error:.1%}"


def test_packing_cuts_optimizer_steps_and_keeps_the_loss_scale():
    from frugalrl.selection import Selection, pack

    chosen = Selection(torch.arange(0, 200, 2), torch.full((100,), 2.0), denominator=200.0)
    minibatches = pack(chosen, batch_size=32)
    assert [len(mb.indices) for mb in minibatches] == [32, 32, 32, 4]  # 4 optimizer steps, not 200 / 32 = 7
    assert sorted(torch.cat([mb.indices for mb in minibatches]).tolist()) == chosen.indices.tolist()
    assert sum(mb.denominator for mb in minibatches) == pytest.approx(200.0)  # each estimates the same loss
    assert all(mb.norm_indices is None for mb in minibatches)  # advantages: the rollout's statistics


def test_packed_pivot_runs_fewer_optimizer_steps(tmp_path):
    from frugalrl.training import train

    base = train(tiny_config(), tmp_path / "base", interactive=False)
    pivot = {"warmup_steps": 256, "threshold_boost": 0.0}
    packed = train(tiny_config(selection={"kind": "pivot", "settings": pivot}), tmp_path / "packed", interactive=False)
    per_mb = train(
        tiny_config(selection={"kind": "pivot", "packing": "minibatch", "settings": pivot}),
        tmp_path / "per_minibatch",
        interactive=False,
    )
    assert per_mb["optimizer_steps"] == base["optimizer_steps"]  # thinning a minibatch keeps every step
    assert packed["optimizer_steps"] < 0.8 * base["optimizer_steps"]
    assert packed["backward_samples"] < 0.8 * base["backward_samples"]


def test_fewer_epochs_control_matches_a_fractional_budget(tmp_path):
    from frugalrl.selection import FewerEpochs
    from frugalrl.training import train

    control = FewerEpochs(keep_fraction=0.3)
    sizes = [len(mb.indices) for mb in control.plan(128, 32, 4, 0)]
    assert sizes == [32, 32, 32, 32, 26]  # 0.3 x 4 epochs x 128 = 153.6 -> 154 samples, no rounding of epochs
    config = tiny_config(selection={"kind": "epochs", "settings": {"keep_fraction": 0.5}})
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["techniques"] == ["fewer_epochs"]
    assert summary["backward_samples"] == summary["real_env_steps"]  # half of 2 epochs


@pytest.mark.parametrize("score", ["rank", "raw"])
def test_thresholds_read_quantiles_of_a_miscalibrated_evaluator(score):
    """A transferred evaluator's raw scores can all sit below ``high`` (measured: 0.05-0.59 on a fresh
    CartPole policy), which left only the safety margin and collapsed PPO; ranks restore the bands."""
    from frugalrl.selection import RolloutBatch

    selector = _selector(score=score)

    class Compressed(torch.nn.Module):  # outputs squeezed into [0.3, 0.55], as a weak regressor's are
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return 0.3 + 0.25 * torch.sigmoid(obs[:, 0])

    selector.evaluator = Compressed()
    selector.refresh = lambda batch: None  # keep the stand-in evaluator as it is
    obs = torch.randn(200, 4)
    batch = RolloutBatch(
        obs, torch.zeros(200), torch.zeros(200), torch.zeros(200, 2), torch.randn(200), torch.zeros(200)
    )
    selector.on_rollout(batch, step=10**6)
    full = float((selector.scores >= selector.config.high).float().mean())
    if score == "rank":
        assert selector.scores.min() == 0 and selector.scores.max() == 1
        assert full == pytest.approx(0.2, abs=0.01)  # the top 20% get full compute, as high = 0.8 says
    else:
        assert full == 0.0
