"""Atari facts the benchmarks share: the published reference scores, the seed's curriculum, the Atari-100k rows.

``latent_vs_pixel`` runs the Atari-100k comparison and keeps its rows; ``atari_equal_cpu``,
``demo_game_equal_cpu`` and ``rliable_check`` score full games against the same references; the
claims ledger reads the Atari-100k rows as the table does (``atari100k_runs``).
"""

from __future__ import annotations

# (random, human) scores of the Atari-100k tables (Kaiser et al. 2020, table 1; the same
# references as Mnih et al. 2015 and Badia et al. 2020). Human-normalised = (s - random) / (human - random).
REFERENCES = {
    "ALE/Breakout-v5": (1.7, 30.5),
    "ALE/Pong-v5": (-20.7, 14.6),
    "ALE/Boxing-v5": (0.1, 12.1),
    "ALE/Freeway-v5": (0.0, 29.6),
    "ALE/Krull-v5": (1598.0, 2665.5),
    "ALE/RoadRunner-v5": (11.5, 7845.0),
    "ALE/Kangaroo-v5": (52.0, 3035.0),
    "ALE/Jamesbond-v5": (29.0, 302.8),
    "ALE/KungFuMaster-v5": (258.5, 22736.3),
    "ALE/BankHeist-v5": (14.2, 753.1),
}
# The seed's three curriculum stages (70/30 -> 30/70 virtual/real -> 100% real), as a ``--set`` value.
STAGES = "[{virtual_fraction: 0.7, real_share: 0.2}, {virtual_fraction: 0.3, real_share: 0.3}, " \
         "{virtual_fraction: 0.0, real_share: 0.5}]"  # fmt: skip
# Rows of the protocol "atari100k" (before 2026-12-01, commit 1b5bf2f) trained and evaluated with
# ale-py's episodic_life, which reset the whole game at every lost life: single-life scores, not
# comparable with the references. They stay in the file; the table renders full-game rows only.
ATARI100K_PROTOCOL = "atari100k-full-game"
SINGLE_LIFE_PROTOCOL = "atari100k"


def human_normalised(game: str, score: float) -> float | None:
    """``(score - random) / (human - random)``; None for a game without published references."""
    if game not in REFERENCES:
        return None
    random, human = REFERENCES[game]
    return (score - random) / (human - random)


def atari100k_runs(rows: list[dict], protocol: str = ATARI100K_PROTOCOL) -> tuple[list[dict], dict | None]:
    """Of latent_vs_pixel's rows: the newest run row per (game, variant, seed) at the newest budget, and the
    encoder they used."""
    mine = [r for r in rows if r.get("protocol") == protocol]
    runs = [r for r in mine if r["kind"] == "run"]
    if not runs:
        return [], None
    steps = runs[-1]["steps"]
    newest = {(r["game"], r["variant"], r["seed"]): r for r in runs if r["steps"] == steps}
    encoders = [r for r in mine if r["kind"] == "encoder"]
    return list(newest.values()), (encoders[-1] if encoders else None)
