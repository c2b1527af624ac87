"""The seed documents' claims beside what one pipeline run measured.

The report shows, for each technique a branch used, the claim as the seed document states it
and the same quantity as this run measured it (from its summaries and the PEFT table). A run
at the demo's budget is one seed on a small task: the benchmarks in ``docs/benchmarks.md``
(its claims ledger) carry the verdicts; this table only puts the figures side by side.

A new technique adds one ``Claim`` with a ``measure`` that reads the run summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

Summaries = list[dict[str, Any]]  # one per run of the branch; "config" holds the run's config.yaml


@dataclass(frozen=True)
class Claim:
    technique: str  # the summary's technique tag (or "peft") that makes the claim apply
    source: str
    claim: str
    claimed: str
    measure: Callable[[Summaries, dict[str, Any] | None], str | None]  # None: not measured by this run


def _with(runs: Summaries, technique: str) -> dict[str, Any] | None:
    return next((s for s in runs if technique in (s.get("techniques") or [])), None)


def _pivot_compute(runs: Summaries, _: dict | None) -> str | None:
    run = _with(runs, "pivot")
    epochs = ((run or {}).get("config") or {}).get("ppo", {}).get("update_epochs")
    if not run or not epochs or not run.get("real_env_steps"):
        return None
    full = run["real_env_steps"] * epochs  # every collected sample in every epoch, as PPO does
    share = run["backward_samples"] / full
    return (f"backward passes on {run['backward_samples']:,} of the {full:,} samples PPO would use "
            f"({1 - share:.1%} fewer), eval {run.get('eval_mean', float('nan')):.1f}")  # fmt: skip


def _latent_psnr(runs: Summaries, _: dict | None) -> str | None:
    encoder = next((s for s in runs if s.get("algo") == "latent_pretrain"), None)
    if not encoder or encoder.get("psnr_db") is None:
        return None
    probe = f"; ball probe R^2 {encoder['ball_r2_mlp']:.2f}" if "ball_r2_mlp" in encoder else ""
    ceiling = f" (ceiling {encoder['ball_ceiling_r2']:.2f})" if "ball_ceiling_r2" in encoder else ""
    return f"{encoder['psnr_db']:.1f} dB after {encoder.get('encoder_updates', '?')} updates{probe}{ceiling}"


def _latent_cost(runs: Summaries, _: dict | None) -> str | None:
    policy = _with(runs, "latent_curriculum")
    encoder = next((s for s in runs if s.get("algo") == "latent_pretrain"), None)
    if not policy:
        return None
    steps = policy.get("real_env_steps", 0) + policy.get("virtual_env_steps", 0)
    text = (f"{policy.get('virtual_env_steps', 0) / max(steps, 1):.0%} of the policy's steps were imagined; "
            f"its learning {policy.get('train_flops', 0) / 1e9:,.1f} GFLOPs, acting (frame encoding included) "
            f"{policy.get('inference_flops', 0) / 1e9:,.1f}")  # fmt: skip
    if encoder:
        text += f", encoder + world-model pretraining {encoder.get('total_flops', 0) / 1e9:,.1f} GFLOPs (shared)"
    return text + "; no pixel-PPO baseline in this pipeline"


def _lora(_: Summaries, peft: dict[str, Any] | None) -> str | None:
    rows = [r for r in (peft or {}).get("table", []) if r.get("method") == "lora"]
    if not rows or rows[0].get("return_pct_of_full") is None:
        return None
    row = rows[0]
    return (f"{row['flops_pct_of_full']:.0f}% of full fine-tuning's FLOPs ({row['flops_pct_of_source_training']:.1f}% "
            f"of training the source) for {row['return_pct_of_full']:.0f}% of its return ({row['target']}, "
            f"{row['seeds']} seed(s)); best method here: {peft.get('best_method')}")  # fmt: skip


def _tiered_share(runs: Summaries, _: dict | None) -> str | None:
    run = next((s for s in runs if s.get("replay_top10_share") is not None), None)
    if not run:
        return None
    return (
        f"{run['replay_top10_share']:.0%} of draws from the top-10% TD-error transitions ({run['replay_kind']} replay)"
    )


CLAIMS: list[Claim] = [
    Claim("pivot", "PivotRL", "skipping low-importance states cuts compute at the same score",
          "52% less compute, 97.8 vs 98.3% of the score (CartPole)", _pivot_compute),
    Claim("latent_curriculum", "RLVR", "84x84 frames compress to a 32-dim latent", "PSNR > 30 dB", _latent_psnr),
    Claim("latent_curriculum", "RLVR", "training in latent space cuts the cost", "to 2% of pixel training",
          _latent_cost),
    Claim("peft", "RLVR", "LoRA adapts a policy to a changed task cheaply", "3.2% of the cost for 98% of the score",
          _lora),
    Claim("tiered_replay", "RMT", "hierarchical replay reuses key samples", "top-10% TD-error share 12% -> 58%",
          _tiered_share),
]  # fmt: skip


def claim_rows(runs: Summaries, peft: dict[str, Any] | None = None) -> list[list[str]]:
    """[source, claim, claimed, this run] for every claim whose technique the runs (or ``peft``) used."""
    used = {t for s in runs for t in (s.get("techniques") or [])}
    used |= {"peft"} if peft else set()
    used |= {"tiered_replay"} if any(s.get("replay_kind") == "tiered" for s in runs) else set()
    rows = []
    for claim in CLAIMS:
        if claim.technique in used:
            measured = claim.measure(runs, peft) or "not measured by this run"
            rows.append([claim.source, claim.claim, claim.claimed, measured])
    return rows


def run_summary(directory: Any) -> dict[str, Any]:
    """A run directory's summary.json with its config.yaml (when present) under ``config``."""
    import json
    from pathlib import Path

    directory = Path(directory)
    summary = json.loads((directory / "summary.json").read_text())
    config = directory / "config.yaml"
    if config.is_file():
        summary["config"] = yaml.safe_load(config.read_text())
    return summary
