"""The uniform random policy under frugalrl's Atari evaluation, against the published random scores.

    python -m benchmarks.random_atari --episodes 30 --write

frugalrl's own evaluation (``frugalrl.evaluation.random_policy_returns``, the promotion gate's
floor): full games (all lives), sticky actions 0.25, games cut at 108,000 frames, up to 30 no-op
starts, no automatic FIRE; episode i from seed 10,000 + i. The published random scores are the
references of Mnih et al. 2015 (also Kaiser et al. 2020's table 1): Breakout 1.7, Pong -20.7,
Boxing 0.1. The target (issue 31): each reference inside the 95% bootstrap interval of the mean
over at least 30 games. One row per game in ``benchmarks/results/random_atari.jsonl``.
"""

from __future__ import annotations

import argparse
import time

from . import _harness, _report

GAMES = {"ALE/Breakout-v5": 1.7, "ALE/Pong-v5": -20.7, "ALE/Boxing-v5": 0.1}


def run(args: argparse.Namespace) -> list[dict]:
    from frugalrl.config import EnvConfig
    from frugalrl.evaluation import random_policy_returns, scoring_protocol

    common = _report.batch_common(episodes=args.episodes, seed=args.seed)

    def one(game: str) -> dict:  # in this process: the gate's own function, one game after another
        started, cpu = time.perf_counter(), time.process_time()
        env = EnvConfig(id=game)
        result = random_policy_returns(env, episodes=args.episodes, seed=args.seed)
        return dict(
            game=game, protocol=scoring_protocol(env), published=GAMES[game],
            mean=result.mean, ci_low=result.ci_low, ci_high=result.ci_high, returns=result.returns,
            mean_length=sum(result.lengths) / len(result.lengths),
            wall_s=round(time.perf_counter() - started, 2), cpu_s=round(time.process_time() - cpu, 2),
        )  # fmt: skip

    def line(row: dict) -> str:
        return (f"{row['game']:<18} {row['mean']:7.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]  published "
                f"{row['published']}")  # fmt: skip

    return _harness.measure(GAMES, one, args.results, common, line)


def render(rows: list[dict], results: object) -> str:
    table = [
        [r["game"], f"{r['mean']:.2f}", f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]", f"{r['published']:g}",
         "yes" if r["ci_low"] <= r["published"] <= r["ci_high"] else "**no**", f"{r['mean_length']:,.0f}",
         f"{r['cpu_s']:.0f}"]
        for r in rows
    ]  # fmt: skip
    header = ["game", "mean", "95% interval (bootstrap)", "published", "published inside", "agent steps / game",
              "CPU s"]  # fmt: skip
    return "\n".join([
        *_report.rows_lines(rows, results),
        f"- protocol: {rows[0]['protocol']} (all lives, sticky actions 0.25, games cut at 108,000 frames, no "
        f"automatic FIRE); {rows[0]['episodes']} games per game from seed {rows[0]['seed']}; the gate's random "
        "policy (`frugalrl.evaluation.random_policy_returns`)",
        "- published: Mnih et al. 2015 (the random column Kaiser et al. 2020 reuse)",
        "",
        _report.markdown_table(header, table),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=10_000)
    _report.add_output_args(parser, "random_atari")
    args = parser.parse_args()
    _report.run_or_render("random_atari", args, run, render)


if __name__ == "__main__":
    main()
