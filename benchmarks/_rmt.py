"""Which rows the RMT ablation's tables show, shared by ``rmt_ablation`` and the claims ledger.

A comparison runs in parts (``--part-of``) and may stand on rows of earlier batches that a rerun
reproduced (``--reuse``); ``select`` picks, per env, the tables the section shows, and the ledger's
RMT claims read those same tables.
"""

from __future__ import annotations

import argparse

from . import _report

# What a rerun must match for a kept row to stand in for it (deterministic runs give equal floats).
REPRODUCED = ("config_hash", "optimizer_steps", "eval_mean", "mean_train_return")


def comparison(row: dict) -> str:
    """The comparison a row belongs to: its batch, or the batch it continues (``--part-of``)."""
    return row.get("part_of") or row["batch"]


def select(stored: list[dict], _: argparse.Namespace | None = None) -> list[dict]:
    """Per env: the newest comparison (a batch and the batches that continue it) with the rows it reuses, then
    the newest comparison of every variant not shown yet (each as its own table, its first batch in
    ``shown_in``)."""
    out = []
    for env in dict.fromkeys(r["env_id"] for r in stored):
        rows = [r for r in stored if r["env_id"] == env]
        shown: set[str] = set()
        for head in reversed(rows):
            if head["variant"] in shown:
                continue
            batch = [r for r in rows if comparison(r) == comparison(head)]
            table = _report.with_reused(stored, batch, REPRODUCED, env_id=env)
            shown |= {r["variant"] for r in table}
            out += [{**r, "shown_in": comparison(head)} for r in table]
    return out
