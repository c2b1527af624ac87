"""RMT parts as an ablation: plain DQN/SAC, each part alone, all parts; frugalrl PPO and SB3 as peers.

Per env and seed, every variant is a fresh ``frugalrl train`` subprocess (MLflow off, one torch
thread) from the env's RMT config with parts switched by ``--set``:

    plain        every part off (uniform replay, no meta-controller, epsilon-greedy, plain MLP)
    +replay      hot/warm/cold tiered replay only
    +meta        the meta-controller only
    +explore     Boltzmann exploration only (DQN)
    +fractal     fractal residual blocks only
    all          every part on (the config as shipped)

Peers in the same run: Stable-Baselines3 DQN/SAC with the same hyperparameters, and frugalrl PPO
with RL Zoo settings where a PPO config exists. Reported per env: median (min-max) final eval
return (20 deterministic episodes, fixed seeds), env steps until the mean training return first
reaches the target (LunarLander 200, Pendulum -200; "-" if never), training FLOPs and wall-clock
against plain, and the share of replay draws from the top-10% |TD error| transitions.

    python benchmarks/rmt_ablation.py --envs Pendulum-v1 --seeds 3 --workers 2 --write

The reuse and meta-controller claims are tested as effects, at a budget where the baseline has not
reached its ceiling (every variant has the same env steps and, since the variants share ``train_freq``
and ``gradient_steps``, the same gradient steps; the table shows both)::

    python benchmarks/rmt_ablation.py --envs LunarLander-v3 --steps 100000 --seeds 5 \
        --variants plain +replay +meta --no-peers --workers 2 --write

Every run appends one row to ``benchmarks/results/rmt_ablation.jsonl`` (commit, config hash, command,
load average before and after); ``--report-only`` renders the newest batch of every env from that file.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import _harness
import _report

ENVS = {
    "LunarLander-v3": {"config": "lunarlander-rmt.yaml", "target": 200.0, "ppo": "lunarlander-ppo.yaml"},
    "Pendulum-v1": {"config": "pendulum-sac.yaml", "target": -200.0, "ppo": None},
    "BipedalWalker-v3": {"config": "bipedalwalker-rmt.yaml", "target": 300.0, "ppo": None},
}
OFF = ["replay.kind=uniform", "meta.enabled=false", "dqn.exploration=epsilon", "policy.block=plain",
       "score_stages.stages=[]"]  # fmt: skip
PARTS = {
    "plain": [],
    "+replay": ["replay.kind=tiered"],
    "+meta": ["meta.enabled=true"],
    "+explore": ["dqn.exploration=boltzmann"],
    "+fractal": ["policy.block=fractal"],
    "all": ["replay.kind=tiered", "meta.enabled=true", "dqn.exploration=boltzmann", "policy.block=fractal"],
}
RESULTS = _report.RESULTS_DIR / "rmt_ablation.jsonl"


def run_frugalrl(config: Path, overrides: list[str], workdir: Path, target: float) -> dict:
    load_before = _report.load_average()
    run = _harness.train(config, Path(tempfile.mkdtemp(dir=workdir)) / "run", overrides)
    summary = run.summary
    returns = [r["episode_return"] for r in run.metrics() if r.get("episode_return") is not None]
    reached = _harness.first_reaching(run.out, target)
    return {
        "eval_mean": summary["eval_mean"],
        "config_hash": summary["config_hash"],
        "real_env_steps": summary["real_env_steps"],
        "optimizer_steps": summary["optimizer_steps"],
        # Sample efficiency: the mean training return over the whole run (area under the learning curve).
        "mean_train_return": sum(returns) / len(returns) if returns else None,
        "train_flops": summary["train_flops"],
        "train_s": summary["wall_s"] - summary["eval_s"],
        "steps_to_target": int(reached["step"]) if reached else None,
        "top10_share": summary.get("replay_top10_share"),
        "load_before": load_before,
    }


def run_sb3(config_path: Path, seed: int, overrides: list[str], episodes: int = 20) -> dict:
    """SB3 DQN or SAC with the config's hyperparameters, evaluated on frugalrl's evaluation seeds."""
    import time

    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import DQN, SAC

    from frugalrl.config import load_config

    torch.set_num_threads(1)
    config = load_config(config_path, [f"seed={seed}", *overrides])
    net = {"net_arch": list(config.policy.hidden)}
    started = time.perf_counter()
    if config.algo == "dqn":
        h = config.dqn
        model = DQN("MlpPolicy", config.env.id, learning_rate=h.learning_rate, batch_size=h.batch_size,
                    buffer_size=config.replay.capacity, learning_starts=h.learning_starts, gamma=h.gamma,
                    target_update_interval=h.target_update_interval, train_freq=h.train_freq,
                    gradient_steps=h.gradient_steps, exploration_fraction=h.exploration_fraction,
                    exploration_final_eps=h.exploration_final_eps, policy_kwargs=net, seed=seed,
                    device="cpu")  # fmt: skip
        total = h.total_timesteps
    else:
        h = config.sac
        model = SAC("MlpPolicy", config.env.id, learning_rate=h.learning_rate, batch_size=h.batch_size,
                    buffer_size=config.replay.capacity, learning_starts=h.learning_starts, gamma=h.gamma, tau=h.tau,
                    train_freq=h.train_freq, gradient_steps=h.gradient_steps, policy_kwargs=net, seed=seed,
                    device="cpu")  # fmt: skip
        total = h.total_timesteps
    model.learn(total)
    train_s = time.perf_counter() - started
    env = gym.make(config.env.id)
    returns = _harness.episode_returns(env, lambda obs: model.predict(obs, deterministic=True)[0], episodes,
                                       config.eval.seed)  # fmt: skip
    return {"eval_mean": float(np.mean(returns)), "train_flops": None, "train_s": train_s,
            "steps_to_target": None, "top10_share": None, "load_before": None}  # fmt: skip


def run_chain(env_id: str, seed: int, args: argparse.Namespace, results: list, workdir: Path) -> None:
    spec = ENVS[env_id]
    config = _report.REPO_ROOT / "configs" / spec["config"]
    discrete = env_id == "LunarLander-v3"
    scale = [f"{'dqn' if discrete else 'sac'}.total_timesteps={args.steps}"] if args.steps else []
    variants = [v for v in args.variants if discrete or v != "+explore"]
    for variant in variants:  # one seed's chain: the variants in turn (A B C ...)
        overrides = [f"seed={seed}", *scale, *OFF, *PARTS[variant]]
        if not discrete:
            overrides = [o for o in overrides if not o.startswith("dqn.")]
        row = run_frugalrl(config, overrides, workdir, spec["target"])
        _record(args, results, {"env_id": env_id, "seed": seed, "variant": variant, **row})
    if args.no_peers:
        return
    sb3_overrides = [*scale]
    _record(args, results, {"env_id": env_id, "seed": seed, "variant": "SB3", **run_sb3(config, seed, sb3_overrides)})
    if spec["ppo"]:
        ppo = _report.REPO_ROOT / "configs" / spec["ppo"]
        ppo_scale = [f"ppo.total_timesteps={args.steps}"] if args.steps else []
        row = run_frugalrl(ppo, [f"seed={seed}", *ppo_scale], workdir, spec["target"])
        _record(args, results, {"env_id": env_id, "seed": seed, "variant": "frugalrl PPO", **row})


def _record(args: argparse.Namespace, results: list, row: dict) -> None:
    row = _harness.record(args.results, _report.stamp(args.common, **row),
                          f"{row['env_id']:<16} seed {row['seed']}  {row['variant']:<13} eval {row['eval_mean']:8.1f}  "
                          f"to target {row['steps_to_target']}  train_s {row['train_s']:7.1f}")  # fmt: skip
    results.append(row)


def _against_plain(by: dict, variant: str, seeds: list[int], key: str) -> list[tuple[float, float]]:
    """(variant, plain) values of ``key`` for every seed both have one for."""
    mine, plain = ({s: by[(v, s)].get(key) for s in seeds if (v, s) in by} for v in (variant, "plain"))
    return _report.pair_up(mine, plain)


def _vs_plain(by: dict, variant: str, seeds: list[int], key: str) -> str:
    """``difference of medians / median of per-seed differences`` of ``key`` against plain."""
    pairs = _against_plain(by, variant, seeds, key)
    if not pairs or variant == "plain":
        return "-"
    diff = _report.paired_difference(pairs)
    better = sum(d > 0 for d in diff.per_seed)
    return f"{diff.of_medians:+.1f} / {diff.median:+.1f} ({better} of {len(pairs)} seeds higher)"


def _ratio(by: dict, variant: str, seeds: list[int], key: str) -> str:
    """``ratio of medians / median of per-seed ratios`` of ``key`` against plain (a 0 is no figure)."""
    pairs = [(a, b) for a, b in _against_plain(by, variant, seeds, key) if a and b]
    return _report.paired_ratio(pairs).text() if pairs else "-"


def report(results: list[dict], results_path: Path = RESULTS) -> str:
    """The section for ``results`` (stored rows): per env, its batch's facts and one table."""
    parts = [
        "Every frugalrl variant starts from the env's RMT config with all parts off, then switches on the named "
        "part(s); SB3 uses the same hyperparameters. Differences and ratios against plain are given as "
        '*of medians / median of per-seed* figures. "mean training return" is the mean return of every '
        "training episode of the run: the area under the learning curve, a sample-efficiency measure. "
        "Every variant of an env has the same env steps and gradient steps (columns 3 and 4)."
    ]
    for env_id in dict.fromkeys(r["env_id"] for r in results):
        rows = [r for r in results if r["env_id"] == env_id]
        by = {(r["variant"], r["seed"]): r for r in rows}
        seeds = sorted({r["seed"] for r in rows})
        table = []
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [by[(variant, s)] for s in seeds if (variant, s) in by]
            reached = [r["steps_to_target"] for r in mine if r["steps_to_target"] is not None]
            shares = [r["top10_share"] for r in mine if r["top10_share"] is not None]
            steps = sorted({r.get("real_env_steps") for r in mine} - {None})
            grads = sorted({r.get("optimizer_steps") for r in mine} - {None})
            curve = [r["mean_train_return"] for r in mine if r.get("mean_train_return") is not None]
            table.append([
                variant, len(mine), "/".join(f"{v:,}" for v in steps) or "-", "/".join(f"{v:,}" for v in grads) or "-",
                _report.fmt_mmm([r["eval_mean"] for r in mine], "{:.1f}"), _vs_plain(by, variant, seeds, "eval_mean"),
                _report.fmt_mmm(curve, "{:.1f}") if curve else "-", _vs_plain(by, variant, seeds, "mean_train_return"),
                f"{len(reached)}/{len(mine)}" + (f", median {statistics.median(reached):,.0f}" if reached else ""),
                _ratio(by, variant, seeds, "train_flops"), _ratio(by, variant, seeds, "train_s"),
                f"{statistics.median(shares):.3f}" if shares else "-",
            ])  # fmt: skip
        header = ["variant", "seeds", "env steps", "gradient steps", "eval return", "eval vs plain",
                  "mean training return", "training return vs plain", "reached target (steps)", "FLOPs / plain",
                  "time / plain", "top-10% TD share of draws"]  # fmt: skip
        facts = "\n".join(_report.rows_lines(rows, results_path))
        parts.append(f"**{env_id}** (target {ENVS[env_id]['target']:g})\n\n{facts}\n\n"
                     + _report.markdown_table(header, table))  # fmt: skip
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1"], choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run first-seed .. first-seed + seeds - 1")
    parser.add_argument("--variants", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--no-peers", action="store_true", help="skip SB3 and frugalrl PPO")
    parser.add_argument("--steps", type=int, default=None, help="override every env's budget")
    parser.add_argument("--workers", type=int, default=2)
    _report.add_output_args(parser, "rmt_ablation")
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        args.common = _report.batch_common()
        results: list[dict] = []
        chains = [(env, seed) for seed in range(args.first_seed, args.first_seed + args.seeds) for env in args.envs]
        with tempfile.TemporaryDirectory() as workdir:
            _harness.parallel(lambda chain: run_chain(*chain, args, results, Path(workdir)), chains, args.workers)
        return results

    def select(stored: list[dict], _: argparse.Namespace) -> list[dict]:  # the newest batch of every env
        return [
            r for env in dict.fromkeys(r["env_id"] for r in stored) for r in _report.newest_batch(stored, env_id=env)
        ]

    _report.run_or_render("rmt_ablation", args, run, report, select)


if __name__ == "__main__":
    main()
