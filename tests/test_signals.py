"""Free-signal selectors: each one's plan on a fixed batch (exact indices, the keep fraction, a seed's
determinism), its own cost on the meter, and a tiny PPO run with each."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
import torch

from frugalrl.cost import CostMeter
from frugalrl.nets.policy import build_actor_critic
from frugalrl.selection import RolloutBatch, Selection
from frugalrl.signals import (
    SIGNAL_PHASE,
    AdvantageProportional,
    AdvantageTop,
    ClippedRatioSkip,
    ValueErrorTop,
    inactive_distance,
    kept_count,
    stream_pack,
)

from .conftest import tiny_config

OBS = gym.spaces.Box(-1, 1, (4,))
ADV = torch.tensor([0.1, -2.0, 0.5, 3.0, -0.2, 1.0, -1.5, 0.0, 2.5, -0.7])  # |A| order: 3 8 1 6 5 9 2 4 0 7


def _policy() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_actor_critic(OBS, gym.spaces.Discrete(2), tiny_config().policy)


def _batch(advantages: torch.Tensor = ADV, returns: torch.Tensor | None = None) -> RolloutBatch:
    n = len(advantages)
    gen = torch.Generator().manual_seed(1)
    obs, actions = torch.randn(n, 4, generator=gen), torch.randint(0, 2, (n,), generator=gen)
    returns = advantages + 1.0 if returns is None else returns
    return RolloutBatch(obs, actions, torch.zeros(n), torch.zeros(n, 2), advantages, returns)


def _make(cls: type, keep: float, packing: str = "epoch", **kwargs) -> tuple:
    meter = CostMeter()
    selector = cls(keep, _policy(), meter, packing=packing, norm_adv=kwargs.pop("norm_adv", False), **kwargs)
    return selector, meter


def _plan(selector, batch: RolloutBatch, batch_size: int, epochs: int, step: int = 1000) -> list[Selection]:
    selector.on_rollout(batch, step)
    return list(selector.plan(len(batch.obs), batch_size, epochs, step))


def test_kept_count_is_random_skippings_rule():
    assert [kept_count(0.35, n) for n in (1, 10, 64, 128)] == [1, 4, 23, 45]
    assert kept_count(1.0, 10) == 10


def test_advantage_top_keeps_the_largest_abs_advantage_every_epoch():
    selector, meter = _make(AdvantageTop, 0.4)
    plan = _plan(selector, _batch(), batch_size=4, epochs=2)
    assert [sorted(s.indices.tolist()) for s in plan] == [[1, 3, 6, 8], [1, 3, 6, 8]]  # ceil(0.4 * 10) = 4
    assert [s.denominator for s in plan] == [4.0, 4.0] and all(s.weights is None for s in plan)
    assert meter.aux_samples == {}  # free: no network pass


def test_advantage_top_ranks_the_centred_advantage_the_loss_sees():
    adv = torch.tensor([5.0, 5.1, 4.9, 0.0])  # mean 3.75: centred, index 3 is the largest
    plain, _ = _make(AdvantageTop, 0.25)
    centred, _ = _make(AdvantageTop, 0.25, norm_adv=True)
    assert _plan(plain, _batch(adv), 4, 1)[0].indices.tolist() == [1]
    assert _plan(centred, _batch(adv), 4, 1)[0].indices.tolist() == [3]


def test_thinned_minibatches_keep_the_fraction_of_each_and_normalise_by_it():
    selector, _ = _make(AdvantageTop, 0.5, packing="minibatch")
    torch.manual_seed(3)
    plan = _plan(selector, _batch(), batch_size=4, epochs=1)
    assert [len(s.indices) for s in plan] == [2, 2, 1]  # minibatches of 4, 4, 2
    for s in plan:
        ref = s.norm_indices
        top = ref[ADV[ref].abs().argsort(descending=True)[: len(s.indices)]]
        assert sorted(s.indices.tolist()) == sorted(top.tolist())


def test_rollout_packing_streams_epochs_into_full_minibatches():
    selector, _ = _make(AdvantageTop, 0.4, packing="rollout")
    plan = _plan(selector, _batch(), batch_size=3, epochs=2)
    assert [len(s.indices) for s in plan] == [3, 3, 2]  # ceil(2 * 4 / 3) steps, as random skipping's packing
    assert sorted(torch.cat([s.indices for s in plan]).tolist()) == [1, 1, 3, 3, 6, 6, 8, 8]
    assert [s.denominator for s in plan] == [3.0, 3.0, 2.0]


def test_stream_pack_asks_for_an_epoch_only_when_the_stream_gets_there():
    asked = []

    def choose(epoch: int) -> Selection:
        asked.append(epoch)
        return Selection(torch.arange(4) + 10 * epoch, torch.full((4,), 2.0), 8.0)

    stream = stream_pack(choose, 3, batch_size=4)
    first = next(stream)
    assert asked == [0] and first.denominator == 8.0 and first.weights.tolist() == [2.0] * 4
    rest = list(stream)
    assert asked == [0, 1, 2] and len(rest) == 2 and sum(s.denominator for s in rest) == 16.0


def test_advantage_proportional_is_deterministic_under_a_seed_and_unbiased():
    selector, _ = _make(AdvantageProportional, 0.4, uniform_mix=0.2)
    torch.manual_seed(7)
    a = _plan(selector, _batch(), 4, 2)
    torch.manual_seed(7)
    b = _plan(selector, _batch(), 4, 2)
    assert [s.indices.tolist() for s in a] == [s.indices.tolist() for s in b]
    assert [len(s.indices) for s in a] == [4, 4] and all(s.denominator == 4.0 for s in a)
    p = 0.8 * ADV.abs() / ADV.abs().sum() + 0.2 / 10
    for s in a:  # each draw weighted by 1 / (n p)
        assert s.weights.tolist() == pytest.approx((1.0 / (10 * p[s.indices])).tolist())
    # the weighted mean over the draws estimates the mean over every sample
    loss = torch.arange(10, dtype=torch.float32)
    torch.manual_seed(0)
    estimates = [(s.weights * loss[s.indices]).sum() / s.denominator for s in _plan(selector, _batch(), 4, 4000)]
    assert float(torch.stack(estimates).mean()) == pytest.approx(float(loss.mean()), rel=0.03)


def test_advantage_proportional_biased_variant_has_no_weights_and_favours_large_advantages():
    selector, _ = _make(AdvantageProportional, 0.4, uniform_mix=0.1, unbiased=False)
    torch.manual_seed(0)
    drawn = torch.cat([s.indices for s in _plan(selector, _batch(), 4, 500)])
    assert all(s.weights is None for s in _plan(selector, _batch(), 4, 1))
    counts = torch.bincount(drawn, minlength=10)
    assert counts[3] > counts[0] > 0  # |A| 3.0 against 0.1, and the uniform share reaches every sample


def test_value_error_uses_the_rollout_then_the_current_critic_and_meters_it():
    returns = torch.tensor([0.0, 5.0, -3.0, 0.5, 2.0, -0.1, 1.0, 0.3, -4.0, 0.2])
    selector, meter = _make(ValueErrorTop, 0.3)
    batch = _batch(returns=returns)
    plan = _plan(selector, batch, batch_size=3, epochs=2)
    assert sorted(plan[0].indices.tolist()) == [1, 3, 8]  # epoch 0: |return - value| is |A|
    with torch.no_grad():
        _, _, value = selector.policy.evaluate(batch.obs, batch.actions)
    expected = (returns - value).abs().topk(3).indices
    assert sorted(plan[1].indices.tolist()) == sorted(expected.tolist())
    assert meter.aux_samples == {SIGNAL_PHASE: 10}  # one forward over the rollout, for the second epoch only
    assert meter.flops_per_sample[SIGNAL_PHASE] > 0 and meter.kind_of(SIGNAL_PHASE) == "inference"
    assert meter.unmeasured_phases() == []


def test_inactive_distance_is_where_the_clip_zeroes_the_policy_gradient():
    ratio = torch.tensor([1.5, 1.5, 0.6, 0.6, 1.1])
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0])
    assert inactive_distance(ratio, adv, 0.2).tolist() == pytest.approx([0.3, 0.0, 0.2, 0.0, 0.0])


def _clipped_batch() -> tuple[RolloutBatch, torch.Tensor]:
    ratio = torch.tensor([1.5, 1.3, 1.7, 1.5, 0.6, 1.0, 1.0, 1.0, 1.0, 1.0])
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0])
    # clipped where the clip zeroes the gradient: 0 (0.3 outside), 1 (0.1), 2 (0.5), 4 (0.2); 3 is outside
    # the range on the side where the gradient flows
    return _batch(adv), ratio


def _with_ratio(selector: ClippedRatioSkip, batch: RolloutBatch, ratio: torch.Tensor) -> RolloutBatch:
    with torch.no_grad():
        logprob, _, _ = selector.policy.evaluate(batch.obs, batch.actions)
    batch.logprobs = logprob - ratio.log()  # the rollout's log-probs that give these ratios now
    return batch


def test_clipped_ratio_skips_the_furthest_clipped_when_enough_are_clipped():
    batch, ratio = _clipped_batch()
    selector, meter = _make(ClippedRatioSkip, 0.8, clip_coef=0.2)
    plan = _plan(selector, _with_ratio(selector, batch, ratio), batch_size=8, epochs=2)
    assert len(plan[0].indices) == 8  # epoch 0: r = 1 everywhere, random skipping
    assert sorted(plan[1].indices.tolist()) == [1, 3, 4, 5, 6, 7, 8, 9]  # 2 (0.5) and 0 (0.3) skipped
    assert meter.aux_samples == {SIGNAL_PHASE: 10}
    metrics = selector.metrics()
    assert metrics == {"clipped_ratio_share": pytest.approx(0.4), "clipped_ratio_short": 0.0}


def test_clipped_ratio_skips_every_clipped_sample_then_random_ones_when_too_few_are_clipped():
    batch, ratio = _clipped_batch()
    selector, _ = _make(ClippedRatioSkip, 0.5, clip_coef=0.2)
    batch = _with_ratio(selector, batch, ratio)
    torch.manual_seed(5)
    first = _plan(selector, batch, batch_size=5, epochs=2)
    torch.manual_seed(5)
    second = _plan(selector, batch, batch_size=5, epochs=2)
    assert [s.indices.tolist() for s in first] == [s.indices.tolist() for s in second]  # one seed, one plan
    kept = set(first[1].indices.tolist())
    assert len(kept) == 5 and kept.isdisjoint({0, 1, 2, 4}) and kept < {3, 5, 6, 7, 8, 9}
    assert selector.metrics()["clipped_ratio_short"] == 1.0  # 4 clipped, 5 to skip


def test_clipped_ratio_anneals_the_clip_as_ppo_does():
    selector, _ = _make(ClippedRatioSkip, 0.5, clip_coef=0.2, anneal_clip=True, total_timesteps=40)
    selector.on_rollout(_batch(), step=30)  # rollout 10, 4 updates: the third, 2 done before it
    assert selector.clip() == pytest.approx(0.2 * (1 - 2 / 4))


@pytest.mark.parametrize("kind", ["advantage_top", "advantage_proportional", "value_error", "clipped_ratio"])
def test_ppo_trains_with_each_signal_at_random_skippings_size(kind, tmp_path):
    from frugalrl.training import train

    config = tiny_config(selection={"kind": kind, "settings": {"keep_fraction": 0.25}})
    summary = train(config, tmp_path / "run", interactive=False)
    assert summary["techniques"] == [kind]
    updates = math.ceil(1024 / 128)  # tiny_config: 4 envs x 32 steps, 2 epochs, minibatch 64
    assert summary["backward_samples"] == updates * 2 * kept_count(0.25, 128)
    assert summary["optimizer_steps"] == updates * math.ceil(2 * kept_count(0.25, 128) / 64)
    phases = summary["flops_by_phase"]
    if kind in ("value_error", "clipped_ratio"):  # one forward over the rollout per epoch after the first
        assert phases[SIGNAL_PHASE]["samples"] == updates * 128 and phases[SIGNAL_PHASE]["flops"] > 0
    else:
        assert SIGNAL_PHASE not in phases
