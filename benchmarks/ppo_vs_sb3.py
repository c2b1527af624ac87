"""PPO on CartPole-v1: frugalrl against Stable-Baselines3, same RL Zoo hyperparameters, side by side.

Both learners use RL Zoo's tuned CartPole PPO (rl-baselines3-zoo ``hyperparams/ppo.yml``): 8 envs,
n_steps 32, minibatch 256, 20 epochs, gamma 0.98, GAE lambda 0.8, learning rate 1e-3 and clip range
0.2 both decayed linearly to 0, no entropy bonus, 100k env steps, separate 64x64 tanh actor and critic
(SB3's MlpPolicy default; ``configs/cartpole-ppo.yaml`` for frugalrl).

For every seed the script runs frugalrl, then SB3 (A B A B ...), each in a fresh subprocess with
``torch.set_num_threads(1)``, so no threads, caches or RNG state leak from one run to the next.

Timed figure ("training wall-clock"):

* frugalrl: wall-clock around ``train(cfg, out_dir)`` minus its final evaluation (``summary["eval_s"]``).
  It covers building the vector env and agent, all updates, checkpoint writes (every 50 updates and the
  last) and exporting ``policy.pt``. MLflow tracking is off.
* SB3: wall-clock around building ``make_vec_env("CartPole-v1", n_envs=8, seed=seed)`` and ``PPO(...)``
  plus ``.learn(total_timesteps)``. (``learn`` alone is reported too.)

Final return: 20 deterministic episodes, episode i reset with seed 10000+i. frugalrl: ``summary["eval_mean"]``
(its own evaluator does exactly that); SB3: ``gym.make("CartPole-v1")``, ``reset(seed=10000+i)``,
``model.predict(obs, deterministic=True)`` until the episode ends.

Time to 475: the first update after which the mean return of the last 100 finished training episodes is
>= 475 (frugalrl's ``episode_return`` metric; SB3's ``ep_info_buffer``, which is the same 100-episode window),
as env steps and seconds since the start of training.

Run from the repository root (about 8-10 minutes on 2 cores)::

    nohup python benchmarks/ppo_vs_sb3.py --write > /tmp/ppo_vs_sb3.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _report

TARGET_RETURN = 475.0
TARGET_RATIO = 2.0
EVAL_EPISODES = 20
EVAL_SEED = 10_000
CONFIG = _report.REPO_ROOT / "configs" / "cartpole-ppo.yaml"


# --------------------------------------------------------------------------- workers (one per subprocess)
def _preimport() -> None:
    """Import what torch would otherwise import lazily inside the timed region, for both contenders alike.

    ``torch.optim.Optimizer.__init__`` imports ``torch._dynamo`` on first use (about 2 s here); both
    learners build an Adam optimizer, so both would pay it. Imports are kept out of the timed figure.
    """
    import torch._dynamo  # noqa: F401


def worker_frugalrl(seed: int, timesteps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    _preimport()
    from frugalrl.config import load_config
    from frugalrl.train import train

    cfg = load_config(
        CONFIG, ["tracking.enabled=false", f"seed={seed}", f"ppo.total_timesteps={timesteps}", "threads=1"]
    )
    with tempfile.TemporaryDirectory(prefix="frugalrl-bench-") as tmp:
        out_dir = Path(tmp) / "run"
        started = time.perf_counter()
        summary = train(cfg, out_dir, interactive=False)
        total = time.perf_counter() - started
        reach_steps = reach_s = None
        with (out_dir / "metrics.jsonl").open() as fh:
            for line in fh:
                row = json.loads(line)
                if row.get("episode_return", float("-inf")) >= TARGET_RETURN:
                    reach_steps = int(row["step"])
                    reach_s = row["step"] / row["sps"]  # sps = global_step / meter.wall_s at that update
                    break
    return {
        "train_s": total - summary["eval_s"],
        "total_s": total,
        "summary_wall_minus_eval_s": summary["wall_s"] - summary["eval_s"],
        "learn_s": summary.get("learn_s"),
        "env_s": summary.get("env_s"),
        "eval_mean": summary["eval_mean"],
        "eval_returns": summary.get("eval_returns"),
        "env_steps": summary["real_env_steps"],
        "reach_steps": reach_steps,
        "reach_s": reach_s,
        "torch_threads": torch.get_num_threads(),
    }


def worker_sb3(seed: int, timesteps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    _preimport()
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class ReachTarget(BaseCallback):
        """Notes the first update after which the 100-episode training mean reaches the target."""

        def __init__(self, started: float):
            super().__init__()
            self.started = started
            self.reach_steps: int | None = None
            self.reach_s: float | None = None

        def _check(self) -> None:
            buf = self.model.ep_info_buffer
            if self.reach_steps is None and buf and np.mean([ep["r"] for ep in buf]) >= TARGET_RETURN:
                self.reach_steps = int(self.model.num_timesteps)
                self.reach_s = time.perf_counter() - self.started

        def _on_step(self) -> bool:
            return True

        # on_rollout_start of update k+1 comes right after the gradient steps of update k.
        def _on_rollout_start(self) -> None:
            self._check()

        def _on_training_end(self) -> None:
            self._check()

    started = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=lambda p: p * 1e-3,
        clip_range=lambda p: p * 0.2,
        seed=seed,
        device="cpu",
    )
    callback = ReachTarget(started)
    learn_started = time.perf_counter()
    model.learn(timesteps, callback=callback)
    ended = time.perf_counter()
    env.close()

    eval_env = gym.make("CartPole-v1")
    returns = []
    for i in range(EVAL_EPISODES):
        obs, _ = eval_env.reset(seed=EVAL_SEED + i)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = eval_env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    eval_env.close()
    return {
        "train_s": ended - started,
        "learn_s_only": ended - learn_started,
        "eval_mean": float(np.mean(returns)),
        "eval_returns": returns,
        "env_steps": int(model.num_timesteps),
        "reach_steps": callback.reach_steps,
        "reach_s": callback.reach_s,
        "torch_threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------- driver
def run_worker(kind: str, seed: int, timesteps: int) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as fh:
        result_path = fh.name
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--seed",
        str(seed),
        "--timesteps",
        str(timesteps),
        "--result",
        result_path,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.run(cmd, cwd=_report.REPO_ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} seed {seed} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads(Path(result_path).read_text())
    finally:
        Path(result_path).unlink(missing_ok=True)


def fmt_opt(value: float | None, fmt: str) -> str:
    return "missed" if value is None else fmt.format(value)


def build_report(args: argparse.Namespace, results: list[dict], load_start: str, load_end: str) -> str:
    rows = []
    ratios, ratios_learn = [], []
    fr_times, sb_times, fr_ret, sb_ret = [], [], [], []
    for r in results:
        fr, sb = r["frugalrl"], r["sb3"]
        ratio = sb["train_s"] / fr["train_s"]
        ratios.append(ratio)
        ratios_learn.append(sb["learn_s_only"] / fr["train_s"])
        fr_times.append(fr["train_s"])
        sb_times.append(sb["train_s"])
        fr_ret.append(fr["eval_mean"])
        sb_ret.append(sb["eval_mean"])
        rows.append(
            [
                str(r["seed"]),
                f"{fr['train_s']:.1f}",
                f"{sb['train_s']:.1f} ({sb['learn_s_only']:.1f})",
                f"{ratio:.2f}",
                f"{fr['eval_mean']:.1f}",
                f"{sb['eval_mean']:.1f}",
                f"{fmt_opt(fr['reach_steps'], '{:,}')} / {fmt_opt(fr['reach_s'], '{:.1f} s')}",
                f"{fmt_opt(sb['reach_steps'], '{:,}')} / {fmt_opt(sb['reach_s'], '{:.1f} s')}",
            ]
        )
    per_seed = _report.markdown_table(
        [
            "seed",
            "frugalrl training s",
            "SB3 training s (learn only)",
            "SB3 / frugalrl",
            "frugalrl eval return",
            "SB3 eval return",
            "frugalrl reaches 475 (steps / s)",
            "SB3 reaches 475 (steps / s)",
        ],
        rows,
    )
    n = len(results)
    fr_hit = sum(v >= TARGET_RETURN for v in fr_ret)
    sb_hit = sum(v >= TARGET_RETURN for v in sb_ret)
    med_ratio = _report.summarize(ratios)[0]
    verdict = "met" if med_ratio >= TARGET_RATIO else "missed"
    same_return = fr_hit >= sb_hit
    fr_reach = [r["frugalrl"]["reach_s"] for r in results if r["frugalrl"]["reach_s"] is not None]
    sb_reach = [r["sb3"]["reach_s"] for r in results if r["sb3"]["reach_s"] is not None]
    reach_pairs = [
        r["sb3"]["reach_s"] / r["frugalrl"]["reach_s"]
        for r in results
        if r["sb3"]["reach_s"] is not None and r["frugalrl"]["reach_s"] is not None
    ]
    summary = _report.markdown_table(
        ["figure", "frugalrl", "Stable-Baselines3", "SB3 / frugalrl"],
        [
            [
                "training wall-clock, s, median (min-max)",
                _report.fmt_mmm(fr_times, "{:.1f}"),
                _report.fmt_mmm(sb_times, "{:.1f}"),
                _report.fmt_mmm(ratios, "{:.2f}") + " (paired per seed)",
            ],
            [
                "SB3 `.learn()` only vs frugalrl training",
                "",
                "",
                _report.fmt_mmm(ratios_learn, "{:.2f}"),
            ],
            [
                f"final eval return ({EVAL_EPISODES} det. episodes), median (min-max)",
                _report.fmt_mmm(fr_ret, "{:.1f}"),
                _report.fmt_mmm(sb_ret, "{:.1f}"),
                "",
            ],
            [f"seeds with eval return >= {TARGET_RETURN:.0f}", f"{fr_hit}/{n}", f"{sb_hit}/{n}", ""],
            [
                "s to 100-episode training mean >= 475, median (min-max) over seeds that reach it",
                (_report.fmt_mmm(fr_reach, "{:.1f}") + f" [{len(fr_reach)}/{n}]") if fr_reach else f"missed [0/{n}]",
                (_report.fmt_mmm(sb_reach, "{:.1f}") + f" [{len(sb_reach)}/{n}]") if sb_reach else f"missed [0/{n}]",
                _report.fmt_mmm(reach_pairs, "{:.2f}") if reach_pairs else "-",
            ],
        ],
    )
    target_line = (
        f"**Target: frugalrl at least {TARGET_RATIO:.0f}x faster than SB3 to the same return "
        f"(SB3/frugalrl training wall-clock >= {TARGET_RATIO:.0f}). Measured median ratio {med_ratio:.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}): {verdict}.** Return: frugalrl {fr_hit}/{n} seeds, "
        f"SB3 {sb_hit}/{n} seeds at >= {TARGET_RETURN:.0f}"
        + ("." if same_return else " - frugalrl reaches the return on fewer seeds, so 'same return' also misses.")
    )
    threads = {r["frugalrl"]["torch_threads"] for r in results} | {r["sb3"]["torch_threads"] for r in results}
    lines = _report.machine_lines(
        _report.command_line(),
        load_start,
        load_end,
        extra=[
            f"seeds: {n} ({', '.join(str(r['seed']) for r in results)}); {args.timesteps:,} env steps per run; "
            "order per seed: frugalrl then SB3, each in a fresh subprocess; torch threads: "
            + "/".join(str(t) for t in sorted(threads)),
            "training s: frugalrl = wall-clock around `train()` minus its final evaluation (`eval_s`): env and agent "
            "construction, all updates, checkpoint writes, policy export; MLflow off. SB3 = wall-clock around "
            "`make_vec_env` + `PPO(...)` + `.learn()` (in parentheses: `.learn()` alone). Imports are not timed (both "
            "workers import `torch._dynamo`, which `torch.optim` otherwise imports lazily, before the clock starts).",
            f"eval return: mean of {EVAL_EPISODES} deterministic episodes, episode i reset with seed "
            f"{EVAL_SEED}+i (frugalrl: `summary['eval_mean']`; SB3: same seeds, `model.predict(obs, "
            "deterministic=True)`).",
            "reaches 475: first update after which the mean return of the last 100 finished training episodes "
            "is >= 475; env steps and seconds since training started (frugalrl: cost meter start; SB3: start of "
            "the timed region). 'missed' = never within the budget.",
            "Other processes may share the machine; see the load average.",
        ],
    )
    return "\n".join(
        [
            "RL Zoo CartPole-v1 PPO hyperparameters on both sides (see the script's docstring).",
            "",
            *lines,
            "",
            target_line,
            "",
            summary,
            "",
            "Per seed:",
            "",
            per_seed,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (1..N)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--worker", choices=["frugalrl", "sb3"], help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=None, help="(worker) the seed of this one run")
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        if args.seed is None:
            parser.error("--worker needs --seed")
        fn = worker_frugalrl if args.worker == "frugalrl" else worker_sb3
        result = fn(args.seed, args.timesteps)
        text = json.dumps(result)
        if args.result:
            Path(args.result).write_text(text)
        else:
            print(text)
        return

    load_start = _report.load_average()
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        entry: dict = {"seed": seed}
        for kind in ("frugalrl", "sb3"):
            res = run_worker(kind, seed, args.timesteps)
            entry[kind] = res
            print(
                f"seed {seed} {kind:8s} train {res['train_s']:6.1f} s  eval {res['eval_mean']:6.1f}  "
                f"reach475 {res['reach_steps']} steps / {res['reach_s']}  load {_report.load_average()}",
                flush=True,
            )
        results.append(entry)
    load_end = _report.load_average()
    body = build_report(args, results, load_start, load_end)
    print()
    print(body)
    raw = Path(tempfile.gettempdir()) / "ppo_vs_sb3_results.json"
    raw.write_text(json.dumps(results, indent=1))
    print(f"\nraw results: {raw}")
    if args.write:
        path = _report.write_section("ppo_vs_sb3", body)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
