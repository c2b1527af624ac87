"""Why tiered replay lost to uniform on LunarLander: each suspected cause measured on a store-level fixture.

    python -m benchmarks.tiered_replay_diagnosis --seeds 3 --write

No network: a replay store of ``--capacity`` transitions, each with a fixed heavy-tailed |TD error|
(lognormal, sigma 1), draws ``--calls`` batches of 128 from itself; every batch's errors go back to the
store (``update_priorities``), as DQN does, and one new transition with a fresh error arrives per batch
(LunarLander DQN adds about one per gradient step). The errors do not change with training, so what is
measured is the sampling rule alone. Contenders: uniform, prioritized (alpha 0.6, beta 0.4), tiered
replay as it was (tier thresholds: quantiles of a window of the last 10,000 *drawn* errors), and tiered
replay as it is (quantiles of the *stored* transitions' errors, refreshed every 50 updates).

Per contender and seed, over the second half of the calls: the tier sizes at the end; the share of draws
that went to the 10 most-drawn transitions and to the top 10% of stored errors; the importance weights'
effective sample size per batch (Kish: (sum w)^2 / sum w^2, as a share of the batch) and their mean
(the factor they put on the learning rate, since they are normalised by the batch's largest); the bias
of the weighted batch mean of |TD| (sum w f / sum w) against the stored mean (1 = none), and of the plain
batch mean; and how far the hot threshold sits above the stored 90% quantile (priority / threshold
staleness: 1 = the thresholds track the store). Rows go to ``benchmarks/results/tiered_replay_diagnosis.jsonl``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from frugalrl.replay.storage import TransitionStorage
from frugalrl.replay.stores import PrioritizedReplay, ReplayStore, TieredReplay, UniformReplay

from . import _harness, _report

BATCH = 128


class DrawnQuantileTiers(TieredReplay):
    """Tiered replay with the threshold rule it had until this diagnosis (kept here, not in the store): the
    quantiles of a window of the most recently *drawn* |TD errors|, recomputed on every update."""

    def __init__(self, storage: TransitionStorage, seed: int = 0, window: int = 10_000):
        super().__init__(storage, seed)
        self.recent = np.zeros(window, dtype=np.float64)
        self.recent_count = 0

    def _after_update(self, indices: np.ndarray, td: np.ndarray) -> None:
        window = len(self.recent)
        self.recent[(self.recent_count + np.arange(len(td))) % window] = td
        self.recent_count += len(td)
        seen = self.recent[: min(self.recent_count, window)]
        self.thresholds = tuple(float(np.quantile(seen, q)) for q in self.quantiles)
        stale = np.isin(indices // self.storage.num_envs, self.storage.stale_slots())
        self.sets.move(indices.tolist(), np.where(stale, -1, self.tier_of(td)).tolist())


STORES = {
    "uniform": lambda storage, seed: UniformReplay(storage, seed),
    "prioritized": lambda storage, seed: PrioritizedReplay(storage, seed),
    "tiered, drawn-error quantiles (before)": lambda storage, seed: DrawnQuantileTiers(storage, seed),
    "tiered, stored-error quantiles (now)": lambda storage, seed: TieredReplay(storage, seed),
}


def _add(store: ReplayStore, t: int) -> None:
    obs = np.full((1, 8), t, dtype=np.float32)
    store.add(obs, np.zeros(1, np.int64), np.zeros(1), np.zeros(1, bool), np.zeros(1, bool), obs)


def measure(name: str, seed: int, capacity: int, calls: int) -> dict:
    """One contender on one seed's fixture (see the module docstring)."""
    store = STORES[name](TransitionStorage((8,), np.float32, (), np.int64, 1, capacity), seed)
    rng = np.random.default_rng(1000 + seed)  # the same errors for every contender of a seed
    td = rng.lognormal(0.0, 1.0, size=capacity + calls)  # the error of the t-th transition added
    slot_of = np.zeros(capacity, dtype=np.int64)  # which added transition sits in each flat index
    for t in range(capacity):
        _add(store, t)
        slot_of[t % capacity] = t
    counts = np.zeros(capacity + calls, dtype=np.int64)
    ess, mean_w, weighted, plain, stale_ratio = [], [], [], [], []
    started = time.process_time()
    for call in range(calls):
        batch = store.sample(BATCH)
        errors = td[slot_of[batch.indices]]
        store.update_priorities(batch.indices, errors)
        if call >= calls // 2:
            w = np.ones(BATCH) if batch.weights is None else np.asarray(batch.weights, dtype=np.float64)
            stored = td[slot_of]
            np.add.at(counts, slot_of[batch.indices], 1)
            ess.append(w.sum() ** 2 / (BATCH * np.sum(w**2)))
            mean_w.append(w.mean())
            weighted.append(np.sum(w * errors) / np.sum(w) / stored.mean())
            plain.append(errors.mean() / stored.mean())
            if isinstance(store, TieredReplay) and np.isfinite(store.thresholds[0]):
                stale_ratio.append(store.thresholds[0] / np.quantile(stored, 0.9))
        t = capacity + call  # one new transition per batch, its error unknown to the store
        _add(store, t)
        slot_of[t % capacity] = t
    drawn = counts.sum()
    stats = store.stats()
    return {
        "store": name,
        "seed": seed,
        "capacity": capacity,
        "calls": calls,
        "batch_size": BATCH,
        "tier_sizes": store.tier_sizes() if isinstance(store, TieredReplay) else None,
        "top10_transitions_share": float(np.sort(counts)[-10:].sum() / drawn),
        "top10pct_td_share": stats["replay_top10_share"],
        "ess_share": float(np.mean(ess)),
        "mean_weight": float(np.mean(mean_w)),
        "weighted_mean_bias": float(np.mean(weighted)),
        "plain_mean_bias": float(np.mean(plain)),
        "hot_threshold_over_stored_q90": float(np.median(stale_ratio)) if stale_ratio else None,
        "cpu_s": round(time.process_time() - started, 2),
    }


def render(rows: list[dict], results: Path) -> str:
    seeds = sorted({r["seed"] for r in rows})
    table = []
    for name in dict.fromkeys(r["store"] for r in rows):
        mine = [r for r in rows if r["store"] == name]

        def cell(key: str, fmt: str, mine: list[dict] = mine) -> str:
            values = [r[key] for r in mine if r[key] is not None]
            return _report.fmt_mmm(values, fmt) if values else "-"

        tiers = [r["tier_sizes"] for r in mine if r["tier_sizes"]]
        sizes = (
            " / ".join(f"{np.median([t[k] for t in tiers]):,.0f}" for k in ("hot", "warm", "cold")) if tiers else "-"
        )
        table.append([
            name, sizes, cell("top10_transitions_share", "{:.3f}"), cell("top10pct_td_share", "{:.3f}"),
            cell("ess_share", "{:.2f}"), cell("mean_weight", "{:.2f}"), cell("weighted_mean_bias", "{:.2f}"),
            cell("plain_mean_bias", "{:.2f}"), cell("hot_threshold_over_stored_q90", "{:.1f}"),
        ])  # fmt: skip
    header = ["store", "hot / warm / cold at the end (median)", "draws on the 10 most-drawn transitions",
              "draws on the top 10% of stored |TD|", "IS effective sample size / batch", "mean IS weight",
              "weighted batch mean of |TD| / stored mean", "plain batch mean / stored mean",
              "hot threshold / stored 90% quantile"]  # fmt: skip
    first = rows[0]
    return "\n".join([
        *_report.rows_lines(rows, results),
        f"- fixture: {first['capacity']:,} stored transitions with fixed lognormal |TD errors|, {first['calls']:,} "
        f"batches of {first['batch_size']} drawn by the store from itself (errors fed back, one new transition per "
        f"batch), figures over the second half; {len(seeds)} seeds, median (min-max); the stores' beta is at its "
        f"start (0.4; it anneals to 1 over 100,000 draws, so in a 100k-step DQN run the weights correct more and more)",
        "",
        _report.markdown_table(header, table),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--capacity", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=4_000)
    _report.add_output_args(parser, "tiered_replay_diagnosis")
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        return _harness.measure(
            _harness.interleave(range(1, args.seeds + 1), list(STORES)),
            lambda job: measure(job[1], job[0], args.capacity, args.calls),
            args.results,
            _report.batch_common(),
            line=_line,
        )

    _report.run_or_render("tiered_replay_diagnosis", args, run, render, after=["rmt_ablation"])


def _line(row: dict) -> str:
    return f"seed {row['seed']}  {row['store']:<40} tiers {row['tier_sizes']}  ess {row['ess_share']:.2f}"


if __name__ == "__main__":
    main()
