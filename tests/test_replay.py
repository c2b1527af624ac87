"""Replay storage and the three stores: frames stored once, priorities, tiers, byte budgets."""

from __future__ import annotations

import numpy as np
import pytest

from frugalrl.replay.storage import TransitionStorage
from frugalrl.replay.stores import PrioritizedReplay, SumTree, TieredReplay, UniformReplay


def vector_storage(capacity: int = 64, num_envs: int = 2) -> TransitionStorage:
    return TransitionStorage((3,), np.float32, (), np.int64, num_envs, capacity)


def fill(store, steps: int, num_envs: int = 2, end_every: int = 0) -> None:
    """Observations encode (step, env) so every read can be checked."""
    for t in range(steps):
        obs = np.array([[t, env, 0] for env in range(num_envs)], dtype=np.float32)
        nxt = np.array([[t + 1, env, 0] for env in range(num_envs)], dtype=np.float32)
        ended = np.full(num_envs, end_every > 0 and t % end_every == end_every - 1)
        final = np.array([[t + 1, env, 9] for env in range(num_envs)], dtype=np.float32)
        store.add(obs, np.full(num_envs, t), np.full(num_envs, float(t)), np.zeros(num_envs, bool), ended, nxt, final)


# ------------------------------------------------------------------ storage
def test_vector_transitions_read_back_with_their_next_observation():
    store = UniformReplay(vector_storage())
    fill(store, 10, end_every=4)
    batch = store.sample(64)
    assert (batch.obs[:, 0] == batch.actions).all() and (batch.rewards == batch.actions).all()
    truncated = (batch.actions % 4) == 3
    assert (batch.next_obs[truncated, 2] == 9).all()  # truncations bootstrap from the final obs
    assert (batch.next_obs[~truncated, 0] == batch.obs[~truncated, 0] + 1).all()
    assert (batch.next_obs[:, 1] == batch.obs[:, 1]).all()


def test_ring_overwrites_the_oldest_steps():
    store = UniformReplay(vector_storage(capacity=8))  # 4 slots of 2 envs
    fill(store, 10)
    assert len(store.storage) == 8
    steps = store.sample(200).obs[:, 0]
    assert set(steps.tolist()) == {6.0, 7.0, 8.0, 9.0}


def test_frames_are_stored_once_and_stacks_rebuilt_with_zero_padding():
    n, stack = 2, 4
    storage = TransitionStorage((stack, 6, 6), np.uint8, (), np.int64, n, capacity=40, frame_stack=stack)
    store = UniformReplay(storage)
    frames = np.zeros((n, stack, 6, 6), np.uint8)
    for t in range(15):
        new = np.full((n, 6, 6), t + 1, np.uint8)
        ended = np.array([t == 6, False])
        nxt = np.concatenate([frames[:, 1:], new[:, None]], axis=1)
        final = nxt.copy()
        nxt[ended] = 0
        nxt[ended, -1] = 100 + t  # the reset frame of env 0
        store.add(frames, np.zeros(n, int), np.zeros(n), np.zeros(n, bool), ended, nxt, final)
        frames = nxt
    assert storage.frames.shape == (20, n, 6, 6)  # one frame per transition, not a stack
    slots, envs = np.array([7, 8, 14]), np.array([0, 0, 1])
    obs = storage.observations(slots, envs)
    assert obs[0, :, 0, 0].tolist() == [0, 0, 0, 106]  # first step after the reset: zero-padded
    assert obs[1, :, 0, 0].tolist() == [0, 0, 106, 8]
    assert obs[2, :, 0, 0].tolist() == [11, 12, 13, 14]
    nxt = storage.next_observations(np.array([6]), np.array([0]))
    assert nxt[0, :, 0, 0].tolist() == [4, 5, 6, 7]  # the truncated episode's final observation


def test_replay_stays_within_its_byte_budget_on_atari_frames():
    budget = 50 * 2**20
    storage = TransitionStorage((4, 84, 84), np.uint8, (), np.int64, 8, capacity=1_000_000, max_bytes=budget)
    store = UniformReplay(storage)
    obs = np.random.default_rng(0).integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    for _ in range(storage.slots + 10):
        store.add(obs, np.zeros(8, int), np.zeros(8), np.zeros(8, bool), np.zeros(8, bool), obs)
    assert storage.nbytes <= budget
    assert storage.capacity == storage.slots * 8 > 700  # ~7 KB per transition: about 7,400 fit
    assert store.sample(32).obs.shape == (32, 4, 84, 84)


# ------------------------------------------------------------------ prioritized
def test_sum_tree_draws_match_priorities_on_100k_draws():
    tree = SumTree(6)
    priorities = np.array([1.0, 2.0, 0.0, 4.0, 0.5, 2.5])
    tree.set(np.arange(6), priorities)
    assert tree.total == pytest.approx(priorities.sum())
    values = np.random.default_rng(1).random(100_000) * tree.total
    counts = np.bincount(tree.find(values), minlength=6) / 100_000
    np.testing.assert_allclose(counts, priorities / priorities.sum(), atol=0.005)
    tree.set(np.array([3]), np.array([0.0]))
    assert 3 not in tree.find(np.random.default_rng(2).random(10_000) * tree.total)


def test_prioritized_replay_prefers_large_td_errors_and_weights_them_down():
    store = PrioritizedReplay(vector_storage(capacity=100), alpha=1.0, beta=1.0)
    fill(store, 50)
    td = np.zeros(100)
    td[7] = 100.0
    store.update_priorities(np.arange(100), td)
    batch = store.sample(256)
    assert np.mean(batch.indices == 7) > 0.9
    assert batch.weights[batch.indices == 7].max() < batch.weights.max() or (batch.indices == 7).all()


# ------------------------------------------------------------------ tiered
def test_tier_assignment_follows_td_quantiles():
    store = TieredReplay(vector_storage(capacity=200), hot_quantile=0.9, warm_quantile=0.5)
    fill(store, 100)
    td = np.arange(200, dtype=np.float64)  # quantiles: 0.5 -> 99.5, 0.9 -> 179.1
    store.update_priorities(np.arange(200), td)
    assert store.thresholds == pytest.approx((np.quantile(td, 0.9), np.quantile(td, 0.5)))
    assert store.tier_sizes() == {"hot": 20, "warm": 80, "cold": 100}
    tiers = store.sets.tier
    assert (tiers[180:] == 0).all() and (tiers[100:180] == 1).all() and (tiers[:100] == 2).all()


def test_tier_weights_set_the_draw_shares_and_top10_share_is_reported():
    store = TieredReplay(vector_storage(capacity=200), tier_weights=(0.6, 0.3, 0.1))
    fill(store, 100)
    store.update_priorities(np.arange(200), np.arange(200, dtype=np.float64))
    drawn = np.concatenate([store.sample(256).indices for _ in range(200)])
    shares = np.bincount(store.sets.tier[drawn], minlength=3) / len(drawn)
    np.testing.assert_allclose(shares, [0.6, 0.3, 0.1], atol=0.01)
    stats = store.stats()
    assert stats["replay_top10_share"] == pytest.approx(0.6, abs=0.03)  # the hot tier is the top 10%
    uniform = UniformReplay(vector_storage(capacity=200))
    fill(uniform, 100)
    uniform.update_priorities(np.arange(200), np.arange(200, dtype=np.float64))
    for _ in range(200):
        uniform.sample(256)
    assert uniform.stats()["replay_top10_share"] == pytest.approx(0.1, abs=0.02)


def test_new_transitions_start_hot_and_stale_slots_leave_the_tiers():
    n, stack = 2, 4
    storage = TransitionStorage((stack, 2, 2), np.uint8, (), np.int64, n, capacity=16, frame_stack=stack)
    store = TieredReplay(storage)
    obs = np.zeros((n, stack, 2, 2), np.uint8)
    for _ in range(12):  # 8 slots: the ring wrapped
        store.add(obs, np.zeros(n, int), np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), obs)
    stale = storage.stale_slots()
    assert len(stale) == 3
    assert (store.sets.tier[(stale[:, None] * n + np.arange(n)).ravel()] == -1).all()
    assert store.tier_sizes()["hot"] == 16 - 6
    drawn = store.sample(500).indices // n
    assert not np.isin(drawn, stale).any()


def _stored_tds(n: int = 2000, seed: int = 3) -> np.ndarray:
    """A heavy-tailed |TD error| per transition, fixed: the feedback below needs no learning."""
    return np.random.default_rng(seed).lognormal(0.0, 1.0, size=n)


def test_tiers_keep_their_quantile_sizes_under_their_own_draws():
    # The cause of tiered replay's loss: thresholds taken over the *drawn* errors rise with every draw that
    # favours the hot tier, until the hot tier is a handful of transitions. Taken over the stored errors,
    # the tiers keep the sizes the quantiles name however long the store draws from itself.
    store = TieredReplay(vector_storage(capacity=2000, num_envs=1), hot_quantile=0.9, warm_quantile=0.5)
    fill(store, 2000, num_envs=1)
    td = _stored_tds()
    for _ in range(400):
        batch = store.sample(128)
        store.update_priorities(batch.indices, td[batch.indices])
    known = np.isfinite(store.td_abs)
    sizes = store.tier_sizes()
    unknown = int((~known).sum())  # never drawn yet: hot until their error is known
    assert sizes["hot"] - unknown == pytest.approx(0.1 * known.sum(), rel=0.15)
    assert sizes["warm"] == pytest.approx(0.4 * known.sum(), rel=0.15)
    assert store.thresholds[0] == pytest.approx(np.quantile(td[known], 0.9), rel=0.05)


def test_importance_weights_undo_the_tier_mixture_bias():
    # Drawn by tier, the plain batch mean of |TD| is far above the stored mean (the hot tier is over-drawn);
    # with beta = 1 the weighted mean sum(w f) / sum(w) is the uniform expectation again.
    store = TieredReplay(vector_storage(capacity=2000, num_envs=1), beta=1.0)
    fill(store, 2000, num_envs=1)
    td = _stored_tds()
    store.update_priorities(np.arange(2000), td)
    plain, weighted = [], []
    for _ in range(300):
        batch = store.sample(256)
        f = td[batch.indices]
        plain.append(f.mean())
        weighted.append(np.sum(batch.weights * f) / np.sum(batch.weights))
    assert np.mean(plain) > 1.5 * td.mean()  # the known bias
    assert np.mean(weighted) == pytest.approx(td.mean(), rel=0.03)  # corrected
