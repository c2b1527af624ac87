"""PivotRL against baseline PPO and two equal-compute controls, side by side.

For every (env, seed) the script trains, one after another with the same seed and env-step budget:

1. ``ppo``      baseline PPO (``selection.kind=all``);
2. ``pivot``    PPO + PivotRL importance-based compute skipping (the env's ``configs/*-pivot.yaml``);
3. ``random``   control (a): PPO that skips a uniformly random subset of each minibatch, keeping the
                fraction ``r`` of samples that pivot kept in step 2 (``backward_samples`` ratio);
4. ``epochs``   control (b): PPO with ``round(update_epochs * r)`` epochs (at least 1);
5. ``pivot_adv`` (``--labels``) pivot with the cheaper ``|advantage|`` label, to compare label definitions.

Controls get pivot's measured compute, so the question answered is whether choosing *which* states to
compute on matters, not whether computing less is cheaper. Every run is a fresh subprocess
(``frugalrl train``, MLflow off, one torch thread). Chains of different seeds run in parallel
(``--workers``), each chain strictly in the order above.

Reported per env: median (min-max) final eval return (20 deterministic episodes, fixed seeds), the
return ratio to PPO, and the ratios of backward samples, training FLOPs (evaluator scoring, evaluator
training and grad-norm labels included) and training wall-clock (summary wall_s minus eval_s), plus the
evaluator's share of pivot's training FLOPs.

    python benchmarks/pivot_vs_ppo.py --envs CartPole-v1 Acrobot-v1 --seeds 5 --workers 2 --labels --write
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

CONFIGS = {
    "CartPole-v1": "cartpole-pivot.yaml",
    "Acrobot-v1": "acrobot-pivot.yaml",
    "LunarLander-v3": "lunarlander-pivot.yaml",
    "MountainCar-v0": "mountaincar-pivot.yaml",
}
EPOCHS = {"CartPole-v1": 20, "Acrobot-v1": 4, "LunarLander-v3": 4, "MountainCar-v0": 4}
VARIANT_ORDER = ("ppo", "pivot", "random", "epochs", "pivot_adv")
DESCRIPTIONS = {
    "ppo": "PPO (all samples)",
    "pivot": "PPO + PivotRL (policy-gradient label)",
    "random": "control (a): random skip, same kept fraction",
    "epochs": "control (b): fewer epochs, same compute",
    "pivot_adv": "PPO + PivotRL (abs-advantage label)",
}
_lock = threading.Lock()


def run_training(config: Path, overrides: list[str], workdir: Path) -> dict:
    """One ``frugalrl train`` in a fresh process; returns its summary.json (plus ``run_dir``)."""
    out = Path(tempfile.mkdtemp(dir=workdir))
    args = [sys.executable, "-m", "frugalrl.cli", "train", str(config), "--out", str(out / "run")]
    for item in ["tracking.enabled=false", "threads=1", *overrides]:
        args += ["--set", item]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=out)
    if proc.returncode != 0:
        raise RuntimeError(f"training failed ({' '.join(overrides)}): {proc.stderr.strip().splitlines()[-1:]}")
    return {**json.loads((out / "run" / "summary.json").read_text()), "run_dir": str(out / "run")}


def _record(results_path: Path, results: list, row: dict) -> None:
    with _lock:
        results.append(row)
        results_path.write_text(json.dumps(results, indent=1))
        print(
            f"{row['env_id']:<16} seed {row['seed']}  {row['variant']:<9} eval {row['eval_mean']:8.1f}  "
            f"backward {row['backward_samples']:>10,}  train_s {row['train_s']:6.1f}",
            flush=True,
        )


def run_chain(env_id: str, seed: int, args: argparse.Namespace, results: list, workdir: Path) -> None:
    config = _report.REPO_ROOT / "configs" / CONFIGS[env_id]
    scale = [f"ppo.total_timesteps={args.timesteps}"] if args.timesteps else []

    def run(variant: str, overrides: list[str]) -> dict:
        summary = run_training(config, [f"seed={seed}", *scale, *overrides], workdir)
        row = {
            "env_id": env_id,
            "seed": seed,
            "variant": variant,
            "overrides": overrides,
            "train_s": summary["wall_s"] - summary["eval_s"],
            **{k: summary[k] for k in ("eval_mean", "backward_samples", "train_flops", "aux_flops", "real_env_steps")},
        }
        _record(args.results, results, row)
        return row

    base = run("ppo", ["selection.kind=all"])
    pivot = run("pivot", [])
    kept = pivot["backward_samples"] / base["backward_samples"]
    run("random", ["selection.kind=random", f"selection.random_keep_fraction={kept:.4f}"])
    run("epochs", ["selection.kind=all", f"ppo.update_epochs={max(1, round(EPOCHS[env_id] * kept))}"])
    if args.labels:
        run("pivot_adv", ["pivot.label=advantage"])


def random_policy_return(env_id: str, episodes: int = 20, seed: int = 10_000) -> float:
    """Mean return of uniformly random actions over the evaluation seeds: the floor of the return ratio."""
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for i in range(episodes):
        env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def _ratio(rows: dict, variant: str, key: str, floor: float = 0.0) -> list[float]:
    """Per-seed ratio (variant - floor) / (ppo - floor) of ``key``, paired by seed."""
    seeds = sorted({s for v, s in rows if v == variant and ("ppo", s) in rows})
    return [(rows[(variant, s)][key] - floor) / (rows[("ppo", s)][key] - floor) for s in seeds
            if rows[("ppo", s)][key] != floor]  # fmt: skip


def env_table(env_id: str, results: list[dict], floor: float) -> tuple[str, dict]:
    rows = {(r["variant"], r["seed"]): r for r in results if r["env_id"] == env_id}
    variants = [v for v in VARIANT_ORDER if any(k[0] == v for k in rows)]
    header = ["variant", "seeds", "eval return, median (min-max)", "return ratio to PPO", "backward samples / PPO",
              "train FLOPs / PPO", "train wall-clock / PPO", "evaluator share of FLOPs"]  # fmt: skip
    body = []
    medians: dict[str, dict] = {}
    for variant in variants:
        mine = [r for (v, _), r in rows.items() if v == variant]
        returns = [r["eval_mean"] for r in mine]
        ret_ratio = _ratio(rows, variant, "eval_mean", floor)
        bwd, flops, wall = (_ratio(rows, variant, k) for k in ("backward_samples", "train_flops", "train_s"))
        share = [r["aux_flops"] / r["train_flops"] for r in mine if r["train_flops"]]
        medians[variant] = {
            "return": statistics.median(returns),
            "return_ratio": statistics.median(ret_ratio) if ret_ratio else float("nan"),
            "backward": statistics.median(bwd) if bwd else float("nan"),
            "flops": statistics.median(flops) if flops else float("nan"),
            "seeds": len(mine),
        }
        body.append([
            DESCRIPTIONS[variant], str(len(mine)), _report.fmt_mmm(returns, "{:,.1f}"),
            _report.fmt_mmm(ret_ratio, "{:.3f}") if variant != "ppo" else "1",
            _report.fmt_mmm(bwd, "{:.3f}") if variant != "ppo" else "1",
            _report.fmt_mmm(flops, "{:.3f}") if variant != "ppo" else "1",
            _report.fmt_mmm(wall, "{:.2f}") if variant != "ppo" else "1",
            _report.fmt_mmm(share, "{:.2%}") if variant.startswith("pivot") else "-",
        ])  # fmt: skip
    return _report.markdown_table(header, body), medians


def verdict(env_id: str, m: dict) -> str:
    if "pivot" not in m or "ppo" not in m:
        return "not measured"
    p = m["pivot"]
    if env_id in ("CartPole-v1", "Acrobot-v1"):
        ok = p["backward"] <= 0.55 and p["flops"] <= 0.55 and p["return_ratio"] >= 0.98
        return (
            f"target (backward and FLOPs <= 0.55 of PPO, return ratio >= 0.98): backward {p['backward']:.3f}, "
            f"FLOPs {p['flops']:.3f}, return ratio {p['return_ratio']:.3f}: **{'met' if ok else 'missed'}**"
        )
    if env_id == "LunarLander-v3":
        controls = [m[c]["return"] for c in ("random", "epochs") if c in m]
        ok = bool(controls) and all(p["return"] > c for c in controls)
        return (
            f"target (median return above both controls at the same compute): pivot {p['return']:.1f} vs "
            f"random {m.get('random', {}).get('return', float('nan')):.1f}, "
            f"epochs {m.get('epochs', {}).get('return', float('nan')):.1f}: **{'met' if ok else 'missed'}**"
        )
    return "no target set for this env (the seed document's claim is in the claims ledger)"


def report(results: list[dict], command: str, load_start: str, load_end: str) -> str:
    envs = [e for e in CONFIGS if any(r["env_id"] == e for r in results)]
    lines = [
        "Claim tested (PivotRL seed document): about 50% less compute with under 2% loss of return on "
        "CartPole, LunarLander and MountainCar.",
        "",
        *_report.machine_lines(command, load_start, load_end),
        "- budgets: the env's `configs/*-pivot.yaml` (RL Zoo PPO hyperparameters; pivot thresholds 0.8 / 0.5, "
        "keep_prob 0.5, safety margin 20%, dynamic threshold, evaluator refresh); every contender of a seed "
        "gets the same env steps; controls get pivot's measured kept fraction of that seed.",
        "- ratios are paired per seed (variant / PPO of the same seed), then median (min-max) over seeds. The "
        "return ratio is measured above a random policy: (R - R_random) / (R_PPO - R_random), so it reads the "
        "same for envs with negative returns (R_random: uniform random actions on the same 20 eval seeds).",
        "",
    ]
    for env_id in envs:
        floor = random_policy_return(env_id)
        table, medians = env_table(env_id, results, floor)
        steps = next(r["real_env_steps"] for r in results if r["env_id"] == env_id)
        title = f"#### {env_id} ({steps:,} env steps per run; random policy {floor:.1f})"
        lines += [title, "", table, "", "- " + verdict(env_id, medians), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--seeds-per-env", nargs="*", default=[], metavar="ENV=N", help="fewer seeds for an env: LunarLander-v3=3"
    )
    parser.add_argument("--workers", type=int, default=2, help="chains (env, seed) run in parallel")
    parser.add_argument("--timesteps", type=int, default=None, help="override every env's budget (smoke runs)")
    parser.add_argument("--labels", action="store_true", help="also run pivot with the |advantage| label")
    parser.add_argument("--results", type=Path, default=Path(tempfile.gettempdir()) / "pivot_vs_ppo.json")
    parser.add_argument("--report-only", action="store_true", help="write the table from --results, run nothing")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()

    load_start = _report.load_average()
    results: list[dict] = json.loads(args.results.read_text()) if args.report_only else []
    if not args.report_only:
        with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(args.workers) as pool:
            limits = {item.split("=")[0]: int(item.split("=")[1]) for item in args.seeds_per_env}
            seeds = range(1, args.seeds + 1)
            chains = [(env, seed) for seed in seeds for env in args.envs if seed <= limits.get(env, args.seeds)]
            futures = [pool.submit(run_chain, env, seed, args, results, Path(workdir)) for env, seed in chains]
            for future in futures:
                future.result()
    text = report(results, _report.command_line(), load_start, _report.load_average())
    print(text)
    if args.write:
        _report.write_section("pivot_vs_ppo", text)


if __name__ == "__main__":
    main()
