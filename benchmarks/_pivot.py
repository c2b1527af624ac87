"""What the PivotRL benchmarks share: the env configs, one training run and its row, the random-policy floor.

``pivot_vs_ppo`` runs and renders the main table; ``pivot_pretrained``, ``pivot_transfer`` and
``pivot_labels`` train the same configs the same way; the claims ledger re-derives the PivotRL claims
above the same floor. Each takes these from here, not from another script.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml

from . import _harness, _report

# env -> its PivotRL config under configs/
CONFIGS = {
    "CartPole-v1": "cartpole-pivot.yaml",
    "Acrobot-v1": "acrobot-pivot.yaml",
    "LunarLander-v3": "lunarlander-pivot.yaml",
    "MountainCar-v0": "mountaincar-pivot.yaml",
}
SUMMARY_KEYS = (
    "eval_mean", "eval_std", "eval_returns", "backward_samples", "forward_samples", "optimizer_steps",
    "train_flops", "aux_flops", "real_env_steps", "wall_s", "eval_s", "learn_s", "act_s", "env_s", "compile",
    "updates",
)  # fmt: skip


def resolved_settings(run_dir: Path) -> dict[str, Any]:
    """The settings of a finished run that the tables need, from its resolved ``config.yaml``."""
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    ppo = cfg.get("ppo", {})
    pivot = {k: v for k, v in cfg.get("pivot", {}).items() if k != "evaluator"}
    keys = ("total_timesteps", "num_steps", "batch_size", "update_epochs")
    return {
        "ppo": {k: ppo.get(k) for k in keys},
        "num_envs": cfg.get("env", {}).get("num_envs"),
        "selection": cfg.get("selection"),
        "pivot": pivot,
    }


def run_training(config: Path, overrides: list[str], workdir: Path) -> dict:
    """One ``frugalrl train`` in a fresh process (MLflow off, one thread); its summary.json plus ``run_dir``
    and ``settings`` (see ``resolved_settings``)."""
    run = _harness.train(config, Path(tempfile.mkdtemp(dir=workdir)) / "run", overrides)
    return {**run.summary, "run_dir": str(run.out), "settings": resolved_settings(run.out)}


def run_figures(env_id: str, config: Path, seed: int, variant: str, overrides: list[str], workdir: Path,
                extra: dict | None = None) -> dict:  # fmt: skip
    """Train one variant; the figures of its row (``_harness.measure`` adds the rest)."""
    summary = run_training(config, overrides, workdir)
    return {
        "env": env_id,
        "config": str(config.relative_to(_report.REPO_ROOT)),
        "timesteps": summary["settings"]["ppo"]["total_timesteps"],
        "seed": seed,
        "variant": variant,
        "overrides": overrides,
        "train_s": summary["wall_s"] - summary["eval_s"],
        **{k: summary.get(k) for k in SUMMARY_KEYS},
        "settings": summary["settings"],
        **(extra or {}),
    }


def random_policy_return(env_id: str, episodes: int = 20, seed: int = 10_000) -> float:
    """Mean return of uniformly random actions over the evaluation seeds: the floor of the return ratio."""
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = _harness.episode_returns(env, lambda _: env.action_space.sample(), episodes, seed)
    env.close()
    return float(np.mean(returns))


# --------------------------------------------------------------------------- a pretrained evaluator, a steadier start?
# pivot_pretrain_stability's contenders and its rule, defined before any run (that script's docstring); the ledger
# reads the same rule.
STABILITY_ENVS = {  # env -> (config, budget in env steps, reward_threshold)
    "CartPole-v1": (_report.REPO_ROOT / "configs" / "cartpole-pivot.yaml", 100_000, 475.0),
    "LunarLander-v3": (_report.REPO_ROOT / "configs" / "lunarlander-pivot.yaml", 300_000, 200.0),
}
STABILITY_VARIANTS = ("pretrained", "fresh")
EARLY_SHARE = 0.2
STEADIER = 0.7  # the claim's +30%: the pretrained spread at most this share of the fresh spread


def env_verdict(mine: dict[str, list[dict]]) -> tuple[str, str]:
    """(figures, verdict) of one env: the early spread and median of each contender, the ratio of spreads."""
    spread = {v: statistics.stdev([r["early_return"] for r in rows]) for v, rows in mine.items() if len(rows) > 1}
    level = {v: statistics.median(r["early_return"] for r in rows) for v, rows in mine.items()}
    if len(spread) < 2 or min(len(rows) for rows in mine.values()) < 5:
        return "", f"not yet measured ({min(len(r) for r in mine.values())} of 5 seeds so far)"
    ratio = spread["pretrained"] / spread["fresh"] if spread["fresh"] > 0 else float("inf")
    figures = (f"early spread (SD over seeds) pretrained {spread['pretrained']:.1f} vs fresh {spread['fresh']:.1f} "
               f"({ratio:.2f}x); early median {level['pretrained']:.1f} vs {level['fresh']:.1f}")  # fmt: skip
    steadier, not_lower = ratio <= STEADIER, level["pretrained"] >= level["fresh"]
    verdict = ("confirmed" if steadier and not_lower else "partly (steadier, but starts lower)" if steadier
               else "partly (steadier, not by 30%)" if ratio < 1 and not_lower else "refuted")  # fmt: skip
    return figures, verdict


# --------------------------------------------------------------------------- the MountainCar pilot
MOUNTAINCAR_THRESHOLD = -110.0  # gymnasium's reward_threshold for MountainCar-v0


def chosen_budget(rows: list[dict]) -> tuple[int | None, dict[int, int]]:
    """The MountainCar pilot's rule: the smallest evaluated step at which more than half of the seeds score at
    least ``MOUNTAINCAR_THRESHOLD`` (None: no such step), and how many seeds do at each evaluated step."""
    reached: dict[int, int] = {}
    for row in rows:
        for step, score in row["evaluations"]:
            reached[step] = reached.get(step, 0) + (score >= MOUNTAINCAR_THRESHOLD)
    most = [step for step in sorted(reached) if reached[step] > len(rows) / 2]
    return (most[0] if most else None), reached
