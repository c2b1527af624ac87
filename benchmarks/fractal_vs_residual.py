"""The RMT seed's fractal block against the standard residual block on the same layers (issue 33, item 4).

The seed claims "CartPole convergence +40% against ResNet" for its fractal block (``x + x1 + x2``). The
control is the residual block ``x + x2`` on the same two layers with the same initialisation
(``policy.block: residual``), so the two differ only in the fractal block's extra ``x1`` path; the plain
MLP is there for scale. DQN, every other RMT part off (uniform replay, no meta-controller, epsilon-greedy),
the same env steps and gradient steps for every contender:

- CartPole-v1: ``configs/cartpole-dqn.yaml`` (RL Zoo's DQN settings, 50k steps), threshold 195 (CartPole-v0's
  "solved"), 475 (v1's) also reported: the first four runs made with 475 alone never reached it (epsilon's
  floor of 0.04 keeps the training mean below it), so a table of 475 alone would be censored everywhere;
- LunarLander-v3: ``configs/lunarlander-rmt.yaml`` with its RMT parts off, threshold 200.

Convergence is measured as the field does for this claim: env steps until the training return (mean of the
last 100 episodes, ``metrics.jsonl``) first reaches the threshold; a run that never does is counted at its
budget and marked (a censored figure, so "fewer steps" can only be claimed where the runs got there). Also
the final evaluation return (20 episodes, fixed seeds). Runs go seed by seed, every contender once per seed
(A B C A B C), and rows are kept as each run ends.

    python -m benchmarks.fractal_vs_residual --envs CartPole-v1 --seeds 5 --write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from . import _harness, _report

ENVS = {
    "CartPole-v1": {"config": "cartpole-dqn.yaml", "thresholds": [195.0, 475.0]},  # the first is the verdict's
    "LunarLander-v3": {"config": "lunarlander-rmt.yaml", "thresholds": [200.0]},
}
OFF = ["replay.kind=uniform", "meta.kind=fixed", "dqn.exploration=epsilon", "score_stages.stages=[]"]
CONTENDERS = {"fractal": "policy.block=fractal", "residual": "policy.block=residual", "plain": "policy.block=plain"}
NAME = "fractal_vs_residual"


def run_one(env_id: str, seed: int, contender: str, workdir: Path, steps: int | None = None) -> dict:
    """One DQN run of ``contender`` on ``env_id``: its figures for the row."""
    spec = ENVS[env_id]
    overrides = [f"seed={seed}", *OFF, CONTENDERS[contender]]
    overrides += [f"dqn.total_timesteps={steps}"] if steps else []
    run = _harness.train(_report.REPO_ROOT / "configs" / spec["config"],
                         Path(tempfile.mkdtemp(dir=workdir)) / "run", overrides)  # fmt: skip
    summary = run.summary
    reached = {t: _harness.first_reaching(run.out, t) for t in spec["thresholds"]}
    steps_to = {f"{t:g}": int(row["step"]) if row else None for t, row in reached.items()}
    returns = [r["episode_return"] for r in run.metrics() if r.get("episode_return") is not None]
    primary = spec["thresholds"][0]
    return {"env_id": env_id, "contender": contender, "seed": seed, "threshold": primary,
            "steps_to_threshold": steps_to[f"{primary:g}"], "steps_to": steps_to,
            "mean_train_return": sum(returns) / len(returns) if returns else None,
            "budget_steps": summary["real_env_steps"],
            "optimizer_steps": summary["optimizer_steps"], "eval_mean": summary["eval_mean"],
            "config_hash": summary["config_hash"], "train_s": summary["wall_s"] - summary["eval_s"],
            "cpu_s": run.cpu_s}  # fmt: skip


def _line(row: dict) -> str:
    return (f"{row['env_id']} {row['contender']:8s} seed {row['seed']}: steps to {row['threshold']:g} "
            f"{row['steps_to_threshold']}, eval {row['eval_mean']:.1f}, {row['cpu_s']:.0f} CPU-s")  # fmt: skip


def _steps(row: dict, threshold: str | None = None) -> float:
    """Steps to the (primary) threshold, a run that never got there counted at its budget (censored)."""
    steps = row["steps_to_threshold"] if threshold is None else row["steps_to"][threshold]
    return float(steps if steps is not None else row["budget_steps"])


def _train_return_difference(paired: list[dict]) -> _report.Paired:
    """Fractal - residual in mean training return (the area under the learning curve), paired by seed: the
    figure that still separates them where no run reached the threshold within the budget."""
    return _report.paired_difference([(p["fractal"]["mean_train_return"], p["residual"]["mean_train_return"])
                                      for p in paired])  # fmt: skip


def report(rows: list[dict], results: Path) -> str:
    lines = [
        "DQN with every other RMT part off; every contender of an env has the same env steps and gradient steps. "
        "Steps to threshold: env steps until the training return (mean of the last 100 episodes) first reaches "
        "it; a run that never did counts at its budget (marked with the number that got there). Mean training "
        "return: the area under the learning curve.",
        "",
    ]
    for env_id in dict.fromkeys(r["env_id"] for r in rows):
        mine = [r for r in rows if r["env_id"] == env_id]
        names = [c for c in CONTENDERS if any(r["contender"] == c for r in mine)]
        thresholds = list(mine[0]["steps_to"])
        table = []
        for name in names:
            runs = [r for r in mine if r["contender"] == name]
            cells = []
            for t in thresholds:
                got = sum(r["steps_to"][t] is not None for r in runs)
                cells += [f"{got} of {len(runs)}", _report.fmt_mmm([_steps(r, t) for r in runs])]
            table.append([
                name, str(len(runs)), *cells, _report.fmt_mmm([r["mean_train_return"] for r in runs], "{:.1f}"),
                _report.fmt_mmm([r["eval_mean"] for r in runs], "{:.1f}"),
                "/".join(f"{v:,}" for v in sorted({r["optimizer_steps"] for r in runs})),
                _report.fmt_mmm([r["train_s"] for r in runs], "{:.0f}"),
            ])  # fmt: skip
        lines += [f"**{env_id}** (budget {mine[0]['budget_steps']:,} env steps)", ""]
        per_threshold = [h for t in thresholds for h in (f"reached {t}", f"steps to {t}, median (min-max)")]
        lines.append(_report.markdown_table(
            ["block", "seeds", *per_threshold, "mean training return", "eval return", "gradient steps", "train s"],
            table))  # fmt: skip
        paired, _ = _report.by_seed(mine, ["fractal", "residual"])
        if paired:
            steps = _report.paired_ratio([(_steps(p["fractal"]), _steps(p["residual"])) for p in paired])
            ret = _report.paired_difference([(p["fractal"]["eval_mean"], p["residual"]["eval_mean"]) for p in paired])
            auc = _train_return_difference(paired)
            fewer = sum(_steps(p["fractal"]) < _steps(p["residual"]) for p in paired)
            higher = sum(d > 0 for d in auc.per_seed)
            lines += ["", f"Fractal / residual, paired by seed ({len(paired)} seeds): steps to {thresholds[0]} "
                      f"{steps.text()} (ratio of medians / median of per-seed ratios; below 1: the fractal block "
                      f"gets there sooner; fewer steps on {fewer} of {len(paired)} seeds); mean training return "
                      f"fractal - residual {auc.text('{:+.1f}')} (difference of medians / median of per-seed "
                      f"differences; higher on {higher} of {len(paired)} seeds); eval return fractal - "
                      f"residual {ret.text('{:+.1f}')}."]  # fmt: skip
        lines.append("")
    return "\n".join([*lines, *_report.rows_lines(rows, results)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"], choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run first-seed .. first-seed + seeds - 1")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=list(CONTENDERS))
    parser.add_argument("--steps", type=int, default=None, help="override every env's budget")
    parser.add_argument("--workers", type=int, default=1)
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        args.common = _report.batch_common()
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        jobs = [(env, seed, c) for env in args.envs for seed, c in _harness.interleave(seeds, args.contenders)]
        with tempfile.TemporaryDirectory() as workdir:
            return _harness.measure(jobs, lambda job: run_one(*job, Path(workdir), args.steps), args.results,
                                    args.common, line=_line, workers=args.workers)  # fmt: skip

    def select(stored: list[dict], _: argparse.Namespace) -> list[dict]:  # every kept row: runs add up by seed
        return stored

    _report.run_or_render(NAME, args, run, report, select, after=["rmt_ablation"])


if __name__ == "__main__":
    main()
