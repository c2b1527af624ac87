"""Three replay stores behind one interface: uniform, proportional prioritized, hot/warm/cold tiers.

Every store keeps its transitions in one ``TransitionStorage`` and offers
``add`` / ``sample`` / ``update_priorities`` / ``stats``. They differ only in how they draw:

- ``UniformReplay``: every sampleable transition equally likely (the DQN default).
- ``PrioritizedReplay``: proportional prioritized replay (Schaul et al. 2016), P(i) ~ p_i^alpha
  with p_i = |TD error| + eps, drawn from a sum tree; importance weights (N P(i))^-beta.
- ``TieredReplay``: the RMT seed's hierarchical replay: every transition sits in the hot, warm
  or cold tier by its latest |TD error|, against thresholds that are quantiles of the |TD errors|
  of the transitions stored (not constants, and not of the draws: see ``TieredReplay``); a draw
  picks a tier by the configured tier weights, then a member uniformly; importance weights
  correct for it as in PER.

New transitions count as hot / maximal priority until their TD error is known. Each store
tracks the share of its draws that fall in the current top 10% of known |TD errors| (the seed
claims hierarchical replay lifts it from 12% to 58%).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from frugalrl.replay.registry import REPLAY_STORES
from frugalrl.replay.storage import Transitions, TransitionStorage


class ReplayStore(ABC):
    """The shared part: storage, known |TD errors|, and the top-10% draw statistic."""

    kind = "base"

    def __init__(self, storage: TransitionStorage, seed: int = 0, stats_every: int = 50):
        self.storage = storage
        self.rng = np.random.default_rng(seed)
        self.td_abs = np.full(storage.capacity, np.nan, dtype=np.float32)  # latest |TD| per transition
        self.stats_every = stats_every
        self._top_threshold = np.inf
        self._calls = 0
        self._drawn = 0
        self._drawn_top = 0

    # -------------------------------------------------------------- interface
    def add(self, obs, actions, rewards, terminated, truncated, next_obs, final_obs=None) -> None:  # noqa: ANN001
        slot = self.storage.add(obs, actions, rewards, terminated, truncated, next_obs, final_obs)
        n = self.storage.num_envs
        self.td_abs[slot * n : (slot + 1) * n] = np.nan
        self._after_add(slot)

    def sample(self, batch_size: int) -> Transitions:
        if len(self.storage) == 0:
            raise ValueError("the replay store is empty")
        flat, weights = self._draw(batch_size)
        self._track(flat)
        return self.storage.gather(flat, weights)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        td = np.abs(np.nan_to_num(np.asarray(td_errors, dtype=np.float64), nan=0.0, posinf=1e6, neginf=1e6))
        self.td_abs[indices] = td
        self._after_update(np.asarray(indices), td)

    def stats(self) -> dict[str, Any]:
        return {
            "replay_kind": self.kind,
            "replay_size": len(self.storage),
            "replay_bytes": self.storage.nbytes,
            "replay_top10_share": self._drawn_top / self._drawn if self._drawn else None,
        }

    # -------------------------------------------------------------- hooks
    @abstractmethod
    def _draw(self, batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Flat indices of ``batch_size`` transitions and their importance weights (None: all 1)."""

    def _after_add(self, slot: int) -> None:
        """Hook after a slot was written (uniform replay keeps no priorities)."""
        return

    def _after_update(self, indices: np.ndarray, td: np.ndarray) -> None:
        """Hook after new TD errors arrived (uniform replay keeps no priorities)."""
        return

    # -------------------------------------------------------------- helpers
    def _valid_flat(self, k: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """Map k in [0, sampleable slots) and env ids to flat indices."""
        storage = self.storage
        first = (storage.oldest_slot() + len(storage.stale_slots())) % storage.slots
        return ((first + k) % storage.slots) * storage.num_envs + envs

    def _num_valid_slots(self) -> int:
        return self.storage.size - len(self.storage.stale_slots())

    def _track(self, flat: np.ndarray) -> None:
        if self._calls % self.stats_every == 0:
            known = self.td_abs[np.isfinite(self.td_abs)]
            self._top_threshold = float(np.quantile(known, 0.9)) if len(known) >= 10 else np.inf
        self._calls += 1
        if np.isfinite(self._top_threshold):
            drawn = self.td_abs[flat]
            self._drawn += len(flat)
            self._drawn_top += int(np.sum(np.nan_to_num(drawn, nan=-1.0) >= self._top_threshold))


class UniformReplay(ReplayStore):
    kind = "uniform"

    def _draw(self, batch_size: int) -> tuple[np.ndarray, None]:
        k = self.rng.integers(0, self._num_valid_slots(), size=batch_size)
        envs = self.rng.integers(0, self.storage.num_envs, size=batch_size)
        return self._valid_flat(k, envs), None


class SumTree:
    """A binary tree of sums over ``capacity`` leaves, array-backed; batched update and search."""

    def __init__(self, capacity: int):
        self.leaves = 1 << max(0, (capacity - 1).bit_length())
        self.tree = np.zeros(2 * self.leaves, dtype=np.float64)  # node i has children 2i, 2i+1; root 1

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        nodes = np.asarray(indices, dtype=np.int64) + self.leaves
        self.tree[nodes] = values
        nodes = np.unique(nodes // 2)  # sorted; parents of sorted nodes stay sorted
        while True:
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            parents = nodes // 2
            nodes = parents[np.concatenate(([True], parents[1:] != parents[:-1]))]

    def get(self, indices: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(indices, dtype=np.int64) + self.leaves]

    def find(self, values: np.ndarray) -> np.ndarray:
        """Leaf index whose prefix-sum interval holds each value in [0, total)."""
        nodes = np.ones(len(values), dtype=np.int64)
        values = np.array(values, dtype=np.float64)
        while nodes[0] < self.leaves:
            left = 2 * nodes
            go_right = values >= self.tree[left]
            values = np.where(go_right, values - self.tree[left], values)
            nodes = np.where(go_right, left + 1, left)
        return nodes - self.leaves


class PrioritizedReplay(ReplayStore):
    kind = "prioritized"

    def __init__(
        self,
        storage: TransitionStorage,
        seed: int = 0,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
    ):
        super().__init__(storage, seed)
        self.alpha, self.beta0, self.beta_steps, self.eps = alpha, beta, beta_steps, eps
        self.tree = SumTree(storage.capacity)
        self.max_priority = 1.0
        self.draws = 0

    @property
    def beta(self) -> float:
        return min(1.0, self.beta0 + (1.0 - self.beta0) * self.draws / self.beta_steps)

    def _after_add(self, slot: int) -> None:
        n = self.storage.num_envs
        self.tree.set(np.arange(slot * n, (slot + 1) * n), np.full(n, self.max_priority**self.alpha))
        stale = self.storage.stale_slots()
        if len(stale):
            flat = (stale[:, None] * n + np.arange(n)).ravel()
            self.tree.set(flat, np.zeros(len(flat)))

    def _after_update(self, indices: np.ndarray, td: np.ndarray) -> None:
        priority = td + self.eps
        self.max_priority = max(self.max_priority, float(priority.max()))
        n = self.storage.num_envs
        stale = np.isin(indices // n, self.storage.stale_slots())
        self.tree.set(indices, np.where(stale, 0.0, priority**self.alpha))

    def _draw(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        total = self.tree.total
        # Stratified: one draw per equal segment of the total, as in Schaul et al.
        bounds = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        flat = self.tree.find(np.minimum(bounds, np.nextafter(total, 0)))
        probs = self.tree.get(flat) / total
        count = self._num_valid_slots() * self.storage.num_envs
        weights = (count * np.maximum(probs, 1e-12)) ** (-self.beta)
        self.draws += 1
        return flat, weights / weights.max()


class _TierSets:
    """Members of each tier as swap-remove arrays: O(1) moves, uniform draws within a tier."""

    def __init__(self, capacity: int, tiers: int):
        self.members = np.zeros((tiers, capacity), dtype=np.int64)
        self.count = np.zeros(tiers, dtype=np.int64)
        self.tier = np.full(capacity, -1, dtype=np.int8)  # -1: in no tier (empty or stale)
        self.pos = np.zeros(capacity, dtype=np.int64)

    def move(self, indices: Sequence[int], tiers: Sequence[int]) -> None:
        members, count, tier, pos = self.members, self.count, self.tier, self.pos
        for i, new in zip(indices, tiers, strict=True):
            old = int(tier[i])
            if old == new:
                continue
            if old >= 0:  # swap-remove from the old tier
                p, last = pos[i], members[old, count[old] - 1]
                members[old, p] = last
                pos[last] = p
                count[old] -= 1
            if new >= 0:
                members[new, count[new]] = i
                pos[i] = count[new]
                count[new] += 1
            tier[i] = new

    def assign(self, tiers: np.ndarray) -> None:
        """Every index's tier at once (``tiers``: one entry per index, -1 for none), vectorised."""
        self.tier[:] = tiers
        self.count[:] = 0
        for k in range(len(self.count)):
            members = np.flatnonzero(tiers == k)
            self.members[k, : len(members)] = members
            self.pos[members] = np.arange(len(members))
            self.count[k] = len(members)


class TieredReplay(ReplayStore):
    """Hot / warm / cold tiers by |TD error| against quantiles of the stored transitions' |TD errors|.

    The thresholds are quantiles of the latest |TD error| of every stored transition whose error is
    known, recomputed every ``refresh_every`` priority updates, when every transition is put back in
    its tier against them. Until December 2026 they were quantiles of a window of the *drawn* errors
    instead; the draws favour the hot and warm tiers, so those quantiles sat above the stored ones,
    moved the next draws higher still, and the tiers collapsed: on LunarLander DQN the hot tier held
    0-2 of 20,000 transitions and the warm one under 100, so half of every batch was the newest few
    transitions and the importance weights cut the effective batch to about a quarter (measured:
    ``benchmarks/tiered_replay_diagnosis.py``; docs/offpolicy.md). With the stored quantiles the hot tier
    is the top ``1 - hot_quantile`` of the stored transitions by construction (plus the new ones,
    hot until their error is known), as the RMT seed describes.
    """

    kind = "tiered"
    TIERS = ("hot", "warm", "cold")

    def __init__(
        self,
        storage: TransitionStorage,
        seed: int = 0,
        tier_weights: Sequence[float] = (0.5, 0.3, 0.2),
        hot_quantile: float = 0.9,
        warm_quantile: float = 0.5,
        beta: float = 0.4,
        beta_steps: int = 100_000,
        refresh_every: int = 50,
    ):
        super().__init__(storage, seed)
        self.tier_weights = np.asarray(tier_weights, dtype=np.float64)
        self.quantiles = (hot_quantile, warm_quantile)
        self.sets = _TierSets(storage.capacity, len(self.TIERS))
        self.thresholds = (np.inf, np.inf)
        self.beta0, self.beta_steps = beta, beta_steps
        # A full refresh is one quantile and one pass over the capacity (about 2 ms at 50,000); every
        # 50 updates it costs about 1% of a DQN update, and 50 updates move the quantiles little.
        self.refresh_every = refresh_every
        self.updates = 0
        self.draws = 0

    @property
    def beta(self) -> float:
        return min(1.0, self.beta0 + (1.0 - self.beta0) * self.draws / self.beta_steps)

    def tier_of(self, td: np.ndarray) -> np.ndarray:
        hot, warm = self.thresholds
        return np.where(td >= hot, 0, np.where(td >= warm, 1, 2))

    def _after_add(self, slot: int) -> None:
        n = self.storage.num_envs
        self.sets.move(range(slot * n, (slot + 1) * n), [0] * n)  # unknown TD error: hot
        for stale in self.storage.stale_slots():
            self.sets.move(range(stale * n, (stale + 1) * n), [-1] * n)

    def _after_update(self, indices: np.ndarray, td: np.ndarray) -> None:
        self.updates += 1
        if (self.updates - 1) % self.refresh_every == 0:
            self.refresh()
            return
        tiers = self.tier_of(td)
        stale = np.isin(indices // self.storage.num_envs, self.storage.stale_slots())
        self.sets.move(indices.tolist(), np.where(stale, -1, tiers).tolist())

    def refresh(self) -> None:
        """Thresholds from the stored transitions' known |TD errors|; every stored transition re-tiered."""
        stored = self.sets.tier >= 0  # written and not stale (the tiers drop stale slots as they go)
        known = stored & np.isfinite(self.td_abs)
        if not known.any():
            return
        hot, warm = np.quantile(self.td_abs[known].astype(np.float64), self.quantiles)
        self.thresholds = (float(hot), float(warm))
        tiers = np.where(known, self.tier_of(np.nan_to_num(self.td_abs, nan=0.0)), 0)  # unknown: hot
        self.sets.assign(np.where(stored, tiers, -1).astype(np.int8))

    def tier_sizes(self) -> dict[str, int]:
        return {name: int(self.sets.count[k]) for k, name in enumerate(self.TIERS)}

    def _draw(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        sizes = self.sets.count.astype(np.float64)
        weights = np.where(sizes > 0, self.tier_weights, 0.0)
        weights /= weights.sum()
        per_tier = self.rng.multinomial(batch_size, weights)
        flat, probs = [], []
        for k, m in enumerate(per_tier):
            if m:
                picks = self.rng.integers(0, sizes[k], size=m)
                flat.append(self.sets.members[k, picks])
                probs.append(np.full(m, weights[k] / sizes[k]))
        flat_all, prob_all = np.concatenate(flat), np.concatenate(probs)
        is_weights = (sizes.sum() * prob_all) ** (-self.beta)
        self.draws += 1
        return flat_all, is_weights / is_weights.max()

    def stats(self) -> dict[str, Any]:
        hot, warm = self.thresholds
        sizes = self.tier_sizes()
        return {
            **super().stats(),
            **{f"replay_{name}_size": size for name, size in sizes.items()},
            "replay_hot_threshold": hot if np.isfinite(hot) else None,
            "replay_warm_threshold": warm if np.isfinite(warm) else None,
        }


# ----------------------------------------------------------------------------- registration
class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class _Annealed(_Settings):
    beta: float = Field(0.4, ge=0.0, le=1.0, description="importance-weight exponent at the start (anneals to 1)")
    beta_steps: int = Field(100_000, ge=1, description="sample calls over which beta anneals to 1")


class PrioritizedSettings(_Annealed):  # replay.settings of kind prioritized
    alpha: float = Field(
        0.6, ge=0.0, le=1.0, description="how strongly priorities skew sampling: P(i) ~ priority^alpha (0 = uniform)"
    )


class TieredSettings(_Annealed):  # replay.settings of kind tiered
    tier_weights: tuple[float, float, float] = Field(
        (0.5, 0.3, 0.2),
        description="shares of each minibatch drawn from the hot, warm and cold tiers (over the non-empty ones)",
    )
    hot_quantile: float = Field(
        0.9, gt=0.0, lt=1.0, description="|TD error| quantile above which a transition is hot (the top 10% by default)"
    )
    warm_quantile: float = Field(
        0.5, gt=0.0, lt=1.0, description="|TD error| quantile above which a transition is warm (below: cold)"
    )

    @model_validator(mode="after")
    def _tiers(self) -> TieredSettings:
        if self.warm_quantile >= self.hot_quantile:
            raise ValueError(f"warm_quantile {self.warm_quantile} must be below hot_quantile {self.hot_quantile}")
        if min(self.tier_weights) < 0 or sum(self.tier_weights) <= 0:
            raise ValueError("tier_weights must be non-negative with a positive sum")
        return self


@REPLAY_STORES.register("uniform")
def uniform(storage: TransitionStorage, seed: int, config: Any, settings: None) -> ReplayStore:
    return UniformReplay(storage, seed)


@REPLAY_STORES.register("prioritized", settings=PrioritizedSettings)
def prioritized(storage: TransitionStorage, seed: int, config: Any, settings: PrioritizedSettings) -> ReplayStore:
    return PrioritizedReplay(storage, seed, settings.alpha, settings.beta, settings.beta_steps)


@REPLAY_STORES.register("tiered", settings=TieredSettings)
def tiered(storage: TransitionStorage, seed: int, config: Any, settings: TieredSettings) -> ReplayStore:
    return TieredReplay(
        storage, seed, settings.tier_weights, settings.hot_quantile, settings.warm_quantile,
        beta=settings.beta, beta_steps=settings.beta_steps,
    )  # fmt: skip
