"""The Pong head start's contenders and its rule, shared by ``pong_head_start`` and the claims ledger.

The RLVR seed says an encoder pretrained on Breakout gives Pong a head start (a human-level first score).
"Head start" is fixed here before running, on Pong's own training curve: each update's row carries the
mean score of the real training episodes ended so far (the last 100 at most; a Pong episode is a full
game: it has no lives):

- the early score: that mean at the first update at or after ``EARLY_STEPS`` (50k) real env steps;
- the steps to random + 1: the first env step at which that mean reaches Pong's random-play score + 1
  (-19.7); none when the run never gets there.

Verdict, with 3 seeds of each contender: **not measurable at this budget** when no contender leaves random
play (no early or final score above random + 1 and no run reaching it); else **confirmed** when the Breakout
encoder's median early score reaches the human reference (14.6), **refuted** when it is no higher than the
Pong encoder's or pixel PPO's, **partly** when it is higher than both but below human.
"""

from __future__ import annotations

import statistics

GAME = "ALE/Pong-v5"
RANDOM, HUMAN = -20.7, 14.6  # the Atari-100k reference scores (benchmarks/_atari.py REFERENCES)
EARLY_STEPS = 50_000
CONTENDERS = {  # name: the games its encoder was pretrained on (None: pixel PPO, no encoder)
    "from-breakout": "ALE/Breakout-v5",
    "from-pong": "ALE/Pong-v5",
    "pixel": None,
}
SEEDS = 3


def training_curve(rows: list[dict]) -> list[tuple[int, float]]:
    """(real env step, mean training score so far) of each update row of a run's ``metrics.jsonl`` that has one:
    a latent run's rows count real steps as ``real_step`` (its virtual steps come on top), PPO's as ``step``."""
    return [(r.get("real_step", r.get("step")), r["episode_return"]) for r in rows
            if r.get("episode_return") is not None and r.get("source") != "virtual"]  # fmt: skip


def curve_figures(curve: list[tuple[int, float]]) -> tuple[float | None, int | None]:
    """(early score, first step at random + 1) from (env step, mean training score so far) of each update."""
    early = next((score for step, score in curve if step >= EARLY_STEPS), None)
    reached = next((step for step, score in curve if score >= RANDOM + 1), None)
    return early, reached


def select(rows: list[dict], _: object = None) -> list[dict]:
    """The newest row per (contender, seed) and per encoder (its games)."""
    newest: dict[tuple, dict] = {}
    for r in rows:
        key = ("run", r["contender"], r["seed"]) if r["kind"] == "run" else ("encoder", r["games"])
        newest[key] = r
    return list(newest.values())


def verdict(runs: list[dict]) -> tuple[str, str]:
    """(what was measured, the verdict) by the rule in the docstring."""
    by = {c: [r for r in runs if r["contender"] == c] for c in CONTENDERS}
    parts = []
    for name, rows in by.items():
        if rows:
            earlies = [r["early_score"] for r in rows if r["early_score"] is not None]
            early = f"{statistics.median(earlies):.1f}" if earlies else "-"
            final = statistics.median(r["score"] for r in rows)
            reached = sum(r["steps_to_random_plus_1"] is not None for r in rows)
            parts.append(f"{name} early {early}, final {final:.1f}, random + 1 reached by {reached} of {len(rows)}")
    measured = "; ".join(parts) or "none yet"
    short = [f"{c} {len(v)} of {SEEDS}" for c, v in by.items() if len(v) < SEEDS]
    if short:
        return measured, f"not yet measured ({', '.join(short)} seeds so far)"

    def left_random(rows: list[dict]) -> bool:
        return any(r["steps_to_random_plus_1"] is not None or r["score"] > RANDOM + 1
                   or (r["early_score"] is not None and r["early_score"] > RANDOM + 1) for r in rows)  # fmt: skip

    if not any(left_random(rows) for rows in by.values()):
        return measured, "not measurable at this budget (every contender at random play)"

    def early(name: str) -> float:  # a run too short to have an early score counts as random play
        return statistics.median(RANDOM if r["early_score"] is None else r["early_score"] for r in by[name])

    breakout_early = early("from-breakout")
    if breakout_early >= HUMAN:
        return measured, "confirmed (the Breakout encoder's early score at human level)"
    others = [early(c) for c in ("from-pong", "pixel")]
    if breakout_early <= max(others):
        return measured, "refuted (no early lead over the Pong encoder or pixel PPO)"
    return measured, "partly (an early lead, short of human level)"
