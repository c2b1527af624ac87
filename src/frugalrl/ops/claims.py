"""The seed documents' claims, declared once, and what one pipeline run measured of them.

``SEED_CLAIMS`` states each quantitative claim of the three seed documents (PivotRL, RLVR, RMT) in
the project's words, with the claimed figure and the recipe that rebuilds its verdict from a fresh
clone. The claims ledger in ``docs/benchmarks.md`` (``benchmarks/ledger.py``) reads it and adds the
benchmarks' figures and verdicts; the pipeline's report reads it too, and for each technique a
branch used shows the claim beside the same quantity as this run measured it (from its summaries
and the PEFT table). A run at the demo's budget is one seed on a small task: the ledger carries the
verdicts; the report only puts the figures side by side.

A new claim is one ``SeedClaim``; a technique whose pipeline run measures it adds one ``Claim`` with a
``measure`` that reads the run summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from frugalrl.peft.table import best_line

Summaries = list[dict[str, Any]]  # one per run of the branch; "config" holds the run's config.yaml


@dataclass(frozen=True)
class SeedClaim:
    source: str  # the seed document: PivotRL, RLVR or RMT
    claim: str
    claimed: str  # the figure the document gives
    recipe: str  # what rebuilds the ledger's verdict from a fresh clone ("-": nothing here can)


_PIVOT = "python -m benchmarks.pivot_vs_ppo --seeds 5 --write"
# the shared encoder build the equal-CPU rows used, kept in the repository
_ENCODER = "mkdir -p runs/encoders && cp -r benchmarks/artifacts/atari-shared-encoder runs/encoders/encoder"
_LATENT = ("python -m benchmarks.latent_vs_pixel --games ALE/Breakout-v5 ALE/Pong-v5 --held-out ALE/Boxing-v5 "
           "--seeds 3 --steps 100000 --write")  # fmt: skip
_EQUAL_CPU = (f"{_ENCODER} && python -m benchmarks.atari_equal_cpu --games ALE/Boxing-v5 ALE/Breakout-v5 "
              "ALE/Pong-v5 --variants pixel real stages --seeds 1 2 3 4 5 --cpu-budget-s 1200 "
              "--encoder runs/encoders/encoder --write")  # fmt: skip
_PEFT = "python -m benchmarks.peft_methods --workers 2 --stop-after-s 3000 --write"
_RMT = ("python -m benchmarks.rmt_ablation --envs LunarLander-v3 --steps 100000 --seeds 5 "
        "--variants plain +replay +meta --no-peers --workers 2 --write")  # fmt: skip
_GPU = "-"  # needs GPUs: nothing on a CPU machine rebuilds it

SEED_CLAIMS: dict[str, SeedClaim] = {
    # PivotRL
    "pivot_time": SeedClaim("PivotRL", "training time cut at the same hardware",
                            "40-60% less time, >= 98% task completion", _PIVOT),
    "pivot_evaluator_share": SeedClaim("PivotRL", "evaluator overhead", "< 5% of the main model's compute", _PIVOT),
    "pivot_cartpole": SeedClaim("PivotRL", "CartPole compute cut at the same score", "52% less, 97.8 vs 98.3%",
                                "python -m benchmarks.pivot_vs_ppo --env CartPole-v1 --seeds 5 --write"),
    "pivot_lunarlander": SeedClaim("PivotRL", "LunarLander compute cut at the same score", "48% less, 88.7 vs 89.2%",
                                   "python -m benchmarks.pivot_vs_ppo --env LunarLander-v3 --seeds 3 --write"),
    "pivot_mountaincar": SeedClaim(
        "PivotRL", "MountainCar compute cut at the same score", "55% less, 94.3 vs 95.1%",
        "python -m benchmarks.mountaincar_pilot --seeds 3 --write && python -m benchmarks.pivot_vs_ppo --env "
        "MountainCar-v0 --seeds 5 --timesteps 1800000 --without pivot_mb epochs --write",
    ),
    "pivot_overall": SeedClaim("PivotRL", "importance sampling overall",
                               "about 45% less compute, < 2% performance loss", _PIVOT),
    "pivot_vs_random": SeedClaim(
        "PivotRL", "the evaluator picks the samples that matter",
        "its choice keeps the return (implied: better than a random skip of the same size)",
        "python -m benchmarks.selection_signals --envs LunarLander-v3 BipedalWalker-v3 --seeds 5 --write"),
    "pivot_transfer": SeedClaim("PivotRL", "evaluator transfer speeds training up",
                                "+35% (CartPole -> MountainCar), < 1000 fine-tuning steps",
                                "python -m benchmarks.pivot_transfer --seeds 5 --write"),
    "pivot_pretrain": SeedClaim("PivotRL", "evaluator pretraining steadies the start", "+30% early stability",
                                "python -m benchmarks.pivot_pretrain_stability --seeds 5 --write"),
    "pivot_nodes": SeedClaim("PivotRL", "8-node distributed efficiency", "4.2x", "-"),
    "pivot_mixed_precision": SeedClaim("PivotRL", "mixed precision", "-40% memory, +25% speed", _GPU),
    # RLVR
    "latent_cost": SeedClaim("RLVR", "training cost in latent space", "cost cut to 2%", _LATENT),
    "latent_equal_cpu": SeedClaim("RLVR", "the latent policy plays better for the same compute",
                                  "cost cut to 2% at the same score", _EQUAL_CPU),
    "latent_demo_game": SeedClaim(
        "RLVR", "the same, on the demo's game", "cost cut to 2% at the same score",
        "python -m benchmarks.demo_game_equal_cpu --seeds 1 2 3 4 5 --workdir runs/demo_game_equal_cpu --write"),
    "latent_compression": SeedClaim("RLVR", "84x84 frames to a 32-dim latent", "98.6% less data",
                                    "arithmetic on latent.latent_dim: 32 (configs/breakout-latent.yaml)"),
    "latent_psnr": SeedClaim("RLVR", "encoder reconstruction", "PSNR > 30 dB",
                             "python -m benchmarks.latent_encoders --updates 3000 --write"),
    "latent_size": SeedClaim(
        "RLVR", "latent size", "little gain beyond 64 dims",
        "frugalrl race --config configs/roadrunner-latent.yaml --set eval.episodes=10 --contenders "
        "d64:latent.latent_dim=64 d32:latent.latent_dim=32 d128:latent.latent_dim=128 --seeds 3 --cpu-budget-s 50 "
        "--out runs/race-latent-size && python -m benchmarks.race_examples --race latent-size --keep --write",
    ),
    "latent_transfer": SeedClaim("RLVR", "a Breakout encoder gives Pong a head start", "human-level first score",
                                 "python -m benchmarks.pong_head_start --write"),
    "latent_adaptive": SeedClaim("RLVR", "adaptive curriculum", "Enduro training time -40%", "-"),
    "latent_stage_two": SeedClaim("RLVR", "longer stage two", "Montezuma's Revenge +217% (100k -> 250k steps)", "-"),
    "latent_mixed_precision": SeedClaim("RLVR", "mixed precision", "1.8x on an RTX 3090", _GPU),
    "peft_lora": SeedClaim("RLVR", "PEFT: LoRA", "3.2% of the cost for 98% of the score", _PEFT),
    "peft_adapter": SeedClaim("RLVR", "PEFT: Adapter", "2.8% of the cost for 95% of the score", _PEFT),
    "peft_bitfit": SeedClaim("RLVR", "PEFT: BitFit", "1.9% of the cost for 82% of the score", _PEFT),
    "peft_prefix": SeedClaim("RLVR", "PEFT: Prefix-tuning", "4.1% of the cost for 89% of the score", "-"),
    "peft_best": SeedClaim("RLVR", "PEFT: LoRA best in most tasks", "best of 12 methods", _PEFT),
    # RMT
    "rmt_reuse": SeedClaim("RMT", "key-sample reuse", "3-5x reuse of key samples (better learning)", _RMT),
    "rmt_share": SeedClaim("RMT", "share of key frames in the draws", "12% -> 58%", _RMT),
    "rmt_meta": SeedClaim("RMT", "meta-controller", "Pendulum return +37%", _RMT),
    "rmt_fusion": SeedClaim(
        "RMT", "top-k gradient fusion", "75% less communication",
        "python -m benchmarks.fusion --envs CartPole-v1 --seeds 3 --steps 50000 --eval-episodes 10 --write"),
    "rmt_distributed": SeedClaim("RMT", "distributed efficiency", "2.8x, -61% GPU-hours on MuJoCo", _GPU),
    "rmt_fractal": SeedClaim("RMT", "fractal residual block", "CartPole convergence +40% against ResNet",
                             "python -m benchmarks.fractal_vs_residual --envs CartPole-v1 --seeds 5 --write"),
    "rmt_exploration": SeedClaim("RMT", "Boltzmann + epsilon exploration",
                                 "3x milestone discovery on Montezuma's Revenge", "-"),
    "rmt_env_speed": SeedClaim("RMT", "vectorised env interface", "15 ms -> 2.3 ms per step (6.5x)",
                               "python -m benchmarks.env_throughput --write"),
    "rmt_returns": SeedClaim("RMT", "1M-step returns",
                             "LunarLander 285 vs PPO 198 vs SAC 231; BipedalWalker 312; Breakout 452",
                             "python -m benchmarks.rmt_returns --seeds 3 --write && python -m benchmarks.rmt_returns "
                             "--probe --write"),
    "rmt_throughput": SeedClaim("RMT", "8x V100 throughput", "28k vs 12k steps/s, 94% GPU use", _GPU),
    "rmt_mixed_precision": SeedClaim("RMT", "mixed precision", "1.7x on an RTX 3090", _GPU),
    "rmt_transfer": SeedClaim("RMT", "transfer with frozen features", "4-8x faster adaptation", _PEFT),
}  # fmt: skip


@dataclass(frozen=True)
class Claim:
    technique: str  # the summary's technique tag (or "peft") that makes the claim apply
    key: str  # its declaration in SEED_CLAIMS
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
            f"{row['seeds']} seed(s)); best here: {best_line(peft['table'], peft.get('best_method'))}")  # fmt: skip


def _tiered_share(runs: Summaries, _: dict | None) -> str | None:
    run = next((s for s in runs if s.get("replay_top10_share") is not None), None)
    if not run:
        return None
    return (
        f"{run['replay_top10_share']:.0%} of draws from the top-10% TD-error transitions ({run['replay_kind']} replay)"
    )


CLAIMS: list[Claim] = [
    Claim("pivot", "pivot_cartpole", _pivot_compute),
    Claim("latent_curriculum", "latent_psnr", _latent_psnr),
    Claim("latent_curriculum", "latent_cost", _latent_cost),
    Claim("peft", "peft_lora", _lora),
    Claim("tiered_replay", "rmt_share", _tiered_share),
]


def claim_rows(runs: Summaries, peft: dict[str, Any] | None = None) -> list[list[str]]:
    """[source, claim, claimed, this run] for every claim whose technique the runs (or ``peft``) used."""
    used = {t for s in runs for t in (s.get("techniques") or [])}
    used |= {"peft"} if peft else set()
    used |= {"tiered_replay"} if any(s.get("replay_kind") == "tiered" for s in runs) else set()
    rows = []
    for claim in CLAIMS:
        if claim.technique in used:
            declared = SEED_CLAIMS[claim.key]
            measured = claim.measure(runs, peft) or "not measured by this run"
            rows.append([declared.source, declared.claim, declared.claimed, measured])
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
