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
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
_lock = threading.Lock()


def steps_to_target(run_dir: Path, target: float) -> int | None:
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("episode_return", -float("inf")) >= target:
            return int(row["step"])
    return None


def run_frugalrl(config: Path, overrides: list[str], workdir: Path, target: float) -> dict:
    out = Path(tempfile.mkdtemp(dir=workdir)) / "run"
    args = [sys.executable, "-m", "frugalrl.cli", "train", str(config), "--out", str(out)]
    for item in ["tracking.enabled=false", "threads=1", *overrides]:
        args += ["--set", item]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=out.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"training failed ({' '.join(overrides)}): {proc.stderr.strip().splitlines()[-1:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "eval_mean": summary["eval_mean"],
        "train_flops": summary["train_flops"],
        "train_s": summary["wall_s"] - summary["eval_s"],
        "steps_to_target": steps_to_target(out, target),
        "top10_share": summary.get("replay_top10_share"),
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
    env, returns = gym.make(config.env.id), []
    for i in range(episodes):
        obs, _ = env.reset(seed=config.eval.seed + i)
        done, ret = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            ret, done = ret + float(reward), terminated or truncated
        returns.append(ret)
    return {"eval_mean": float(np.mean(returns)), "train_flops": None, "train_s": train_s,
            "steps_to_target": None, "top10_share": None}  # fmt: skip


def run_chain(env_id: str, seed: int, args: argparse.Namespace, results: list, workdir: Path) -> None:
    spec = ENVS[env_id]
    config = _report.REPO_ROOT / "configs" / spec["config"]
    discrete = env_id == "LunarLander-v3"
    scale = [f"{'dqn' if discrete else 'sac'}.total_timesteps={args.steps}"] if args.steps else []
    variants = [v for v in PARTS if discrete or v != "+explore"]
    for variant in variants:
        overrides = [f"seed={seed}", *scale, *OFF, *PARTS[variant]]
        if not discrete:
            overrides = [o for o in overrides if not o.startswith("dqn.")]
        row = run_frugalrl(config, overrides, workdir, spec["target"])
        _record(args, results, {"env_id": env_id, "seed": seed, "variant": variant, **row})
    sb3_overrides = [*scale]
    _record(args, results, {"env_id": env_id, "seed": seed, "variant": "SB3", **run_sb3(config, seed, sb3_overrides)})
    if spec["ppo"]:
        ppo = _report.REPO_ROOT / "configs" / spec["ppo"]
        ppo_scale = [f"ppo.total_timesteps={args.steps}"] if args.steps else []
        row = run_frugalrl(ppo, [f"seed={seed}", *ppo_scale], workdir, spec["target"])
        _record(args, results, {"env_id": env_id, "seed": seed, "variant": "frugalrl PPO", **row})


def _record(args: argparse.Namespace, results: list, row: dict) -> None:
    with _lock:
        results.append(row)
        args.results.write_text(json.dumps(results, indent=1))
        print(f"{row['env_id']:<16} seed {row['seed']}  {row['variant']:<13} eval {row['eval_mean']:8.1f}  "
              f"to target {row['steps_to_target']}  train_s {row['train_s']:7.1f}", flush=True)  # fmt: skip


def report(results: list[dict], command: str, load_start: str, load_end: str) -> str:
    parts = ["\n".join(_report.machine_lines(command, load_start, load_end, [
        "every frugalrl variant starts from the env's RMT config with all parts off, then switches on the named "
        "part(s); SB3 uses the same hyperparameters; FLOPs and time ratios are per seed against plain, then median",
    ]))]  # fmt: skip
    for env_id in dict.fromkeys(r["env_id"] for r in results):
        rows = [r for r in results if r["env_id"] == env_id]
        by = {(r["variant"], r["seed"]): r for r in rows}
        seeds = sorted({r["seed"] for r in rows})
        table = []
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [by[(variant, s)] for s in seeds if (variant, s) in by]
            reached = [r["steps_to_target"] for r in mine if r["steps_to_target"] is not None]
            flops = [by[(variant, s)]["train_flops"] / by[("plain", s)]["train_flops"] for s in seeds
                     if (variant, s) in by and by[(variant, s)]["train_flops"] and ("plain", s) in by]  # fmt: skip
            secs = [by[(variant, s)]["train_s"] / by[("plain", s)]["train_s"] for s in seeds
                    if (variant, s) in by and ("plain", s) in by]  # fmt: skip
            shares = [r["top10_share"] for r in mine if r["top10_share"] is not None]
            table.append([
                variant, len(mine), _report.fmt_mmm([r["eval_mean"] for r in mine], "{:.1f}"),
                f"{len(reached)}/{len(mine)}" + (f", median {statistics.median(reached):,.0f}" if reached else ""),
                f"{statistics.median(flops):.2f}" if flops else "-", f"{statistics.median(secs):.2f}" if secs else "-",
                f"{statistics.median(shares):.3f}" if shares else "-",
            ])  # fmt: skip
        header = ["variant", "seeds", "eval return", "reached target (steps)", "FLOPs / plain", "time / plain",
                  "top-10% TD share of draws"]  # fmt: skip
        parts.append(f"**{env_id}** (target {ENVS[env_id]['target']:g})\n\n" + _report.markdown_table(header, table))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1"], choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run first-seed .. first-seed + seeds - 1")
    parser.add_argument("--merge", nargs="*", type=Path, default=[], help="--report-only: more results files")
    parser.add_argument("--steps", type=int, default=None, help="override every env's budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", type=Path, default=Path(tempfile.gettempdir()) / "rmt_ablation.json")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    command, load_start = _report.command_line(), _report.load_average()
    if args.report_only:
        results = [row for path in [args.results, *args.merge] for row in json.loads(path.read_text())]
    else:
        results: list[dict] = []
        with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(args.workers) as pool:
            jobs = [pool.submit(run_chain, env, seed, args, results, Path(workdir))
                    for seed in range(args.first_seed, args.first_seed + args.seeds) for env in args.envs]  # fmt: skip
            for job in jobs:
                job.result()
    text = report(results, command, load_start, _report.load_average())
    print(text)
    if args.write:
        _report.write_section("rmt_ablation", text)


if __name__ == "__main__":
    main()
