"""Replay throughput: frugalrl's stores against Stable-Baselines3's ReplayBuffer, side by side.

For each observation kind (CartPole-like vectors; Atari 4x84x84 uint8 stacks) and each store
(SB3 ``ReplayBuffer``, frugalrl uniform, prioritized, tiered), the script measures in one
process, alternating contenders round by round:

- add rate: transitions/s, adding batches of N=8 env steps (SB3 gets the same batches);
- sample rate: transitions/s, drawing minibatches of 256 (32 for Atari) from a full store,
  including the priority update a learner would do after each draw (prioritized, tiered).

Reported: the median over rounds, and each store's ratio to SB3. Memory per stored transition
is reported too (SB3 stores observation and next observation as full stacks).

    python -m benchmarks.replay_throughput --rounds 5 --write
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from frugalrl.config import ReplayConfig
from frugalrl.replay import build_replay

from . import _harness, _report

KINDS = {
    "vector": {"obs": gym.spaces.Box(-1, 1, (4,), np.float32), "capacity": 100_000, "batch": 256},
    "atari": {"obs": gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), "capacity": 50_000, "batch": 32},
}
STORES = ("sb3", "uniform", "prioritized", "tiered")
N = 8


def _data(kind: str, steps: int, rng: np.random.Generator) -> list[tuple]:
    space = KINDS[kind]["obs"]
    out = []
    for _ in range(steps):
        if space.dtype == np.uint8:
            obs = rng.integers(0, 255, (N, *space.shape), dtype=np.uint8)
        else:
            obs = rng.standard_normal((N, *space.shape)).astype(np.float32)
        done = rng.random(N) < 0.01
        out.append((obs, rng.integers(0, 4, N), rng.random(N).astype(np.float32), done, np.zeros(N, bool), obs))
    return out


def _make(store: str, kind: str):  # noqa: ANN202 - either an SB3 buffer or a frugalrl store
    spec = KINDS[kind]
    if store == "sb3":
        from stable_baselines3.common.buffers import ReplayBuffer

        return ReplayBuffer(spec["capacity"], spec["obs"], gym.spaces.Discrete(4), device="cpu", n_envs=N,
                            handle_timeout_termination=False)  # fmt: skip
    return build_replay(ReplayConfig(kind=store, capacity=spec["capacity"]), spec["obs"], gym.spaces.Discrete(4), N)


def _add(buffer, store: str, batch: tuple) -> None:  # noqa: ANN001
    obs, actions, rewards, terminated, truncated, nxt = batch
    if store == "sb3":
        buffer.add(obs, nxt, actions[:, None], rewards, terminated, [{} for _ in range(N)])
    else:
        buffer.add(obs, actions, rewards, terminated, truncated, nxt)


def measure(store: str, kind: str, data: list[tuple], draws: int, rng: np.random.Generator) -> dict[str, float]:
    spec = KINDS[kind]
    buffer = _make(store, kind)
    started = time.perf_counter()
    for batch in data:
        _add(buffer, store, batch)
    add_rate = len(data) * N / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(draws):
        if store == "sb3":
            buffer.sample(spec["batch"])
        else:
            sample = buffer.sample(spec["batch"])
            buffer.update_priorities(sample.indices, rng.standard_normal(len(sample.indices)))
    sample_rate = draws * spec["batch"] / (time.perf_counter() - started)
    size = spec["capacity"]
    nbytes = buffer.observations.nbytes + buffer.next_observations.nbytes if store == "sb3" else buffer.storage.nbytes
    return {"add": add_rate, "sample": sample_rate, "bytes_per_transition": nbytes / size}


def run(args: argparse.Namespace) -> list[dict]:
    KINDS["vector"]["capacity"], KINDS["atari"]["capacity"] = args.vector_capacity, args.atari_capacity
    common = _report.batch_common(rounds=args.rounds, draws=args.draws, vector_capacity=args.vector_capacity,
                                  atari_capacity=args.atari_capacity)  # fmt: skip
    rng = np.random.default_rng(0)
    rows = []
    for kind, spec in KINDS.items():
        data = _data(kind, spec["capacity"] // N, rng)  # fills the store exactly
        jobs = _harness.interleave(range(args.rounds), STORES, mirror=True)  # the order reversed every other round

        def one(job: tuple[int, str], kind: str = kind, data: list = data) -> dict:
            round_, store = job
            return {"kind": kind, "store": store, "round": round_, **measure(store, kind, data, args.draws, rng)}

        def line(row: dict) -> str:
            return f"{row['kind']:<7} {row['store']:<12} add {row['add']:>12,.0f}/s  sample {row['sample']:>12,.0f}/s"

        rows += _harness.measure(jobs, one, args.results, common, line)
    return rows


def _ratios(mine: list[dict], base: list[dict], key: str) -> str:
    """``ratio of medians / median of per-round ratios`` against SB3."""
    pairs = _report.pair_up({r["round"]: r[key] for r in mine}, {r["round"]: r[key] for r in base})
    return _report.paired_ratio(pairs, medians=([r[key] for r in mine], [r[key] for r in base])).text()


def render(all_rows: list[dict], results: Path) -> str:
    first = all_rows[0]
    rows = []
    for kind in dict.fromkeys(r["kind"] for r in all_rows):
        base = [r for r in all_rows if r["kind"] == kind and r["store"] == "sb3"]
        for store in STORES:
            mine = [r for r in all_rows if r["kind"] == kind and r["store"] == store]
            add, sample = statistics.median(r["add"] for r in mine), statistics.median(r["sample"] for r in mine)
            name = "SB3 ReplayBuffer" if store == "sb3" else f"frugalrl {store}"
            rows.append([kind, name, f"{add:,.0f}", _ratios(mine, base, "add"), f"{sample:,.0f}",
                         _ratios(mine, base, "sample"), f"{mine[0]['bytes_per_transition']:,.0f}"])  # fmt: skip
    lines = [
        *_report.rows_lines(all_rows, results),
        f"- {first['rounds']} rounds, store order alternating; N = {N} envs per add; stores filled to capacity "
        f"(vector {first['vector_capacity']:,}, Atari {first['atari_capacity']:,} transitions); {first['draws']} "
        "draws of 256 (vector) / 32 (Atari) per round",
        "- frugalrl prioritized and tiered draws include the priority update after each draw",
        "- ratios: ratio of medians / median of per-round ratios",
    ]
    header = ["obs", "store", "add (transitions/s)", "add / SB3", "sample (transitions/s)", "sample / SB3",
              "bytes per transition"]  # fmt: skip
    return "\n".join(lines) + "\n\n" + _report.markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--vector-capacity", type=int, default=100_000)
    parser.add_argument("--atari-capacity", type=int, default=50_000)
    _report.add_output_args(parser, "replay_throughput")
    args = parser.parse_args()
    _report.run_or_render("replay_throughput", args, run, render)


if __name__ == "__main__":
    main()
