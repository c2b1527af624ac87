"""PivotRL evaluator transfer: does a CartPole-pretrained evaluator speed up Acrobot training?

One CartPole evaluator is pretrained (``frugalrl pretrain evaluator``, seed 1, MLflow off). Then for
every seed, side by side, Acrobot-v1 trains with PivotRL twice: once starting from that evaluator
(``selection.settings.evaluator_from``; CartPole has 4 features and Acrobot 6, so the hidden layers transfer and
the input layer is re-initialised) and once from a fresh evaluator. Reported: env steps until the
mean training return of the last 100 episodes first reaches the target (-100), final eval return,
and backward samples.

    python -m benchmarks.pivot_transfer --seeds 5 --write
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from . import _harness, _report
from ._pivot import run_training

TARGET = -100.0
CONFIG = _report.REPO_ROOT / "configs" / "acrobot-pivot.yaml"


def steps_to_target(run_dir: str, target: float) -> float:
    """First env step at which the logged 100-episode mean return reaches ``target`` (inf if never)."""
    reached = _harness.first_reaching(run_dir, target)
    return float(reached["step"]) if reached else float("inf")


def pretrain_cartpole(workdir: Path) -> _harness.Run:
    out = workdir / "cartpole-evaluator"
    config = _report.REPO_ROOT / "configs" / "cartpole-pivot.yaml"
    return _harness.cli(["pretrain", "evaluator", "--config", config, "--out", out], out)


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common(timesteps=args.timesteps, seeds=args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pretraining = pretrain_cartpole(workdir)
        evaluator, pretrained = pretraining.out, pretraining.summary
        shared = {"evaluator_spearman": pretrained["spearman"], "evaluator_flops": pretrained["total_flops"]}
        budget = [f"ppo.total_timesteps={args.timesteps}"] if args.timesteps else []
        extra = {"transfer": [f"selection.settings.evaluator_from={evaluator}"], "scratch": []}

        def figures(job: tuple[int, str]) -> dict:
            seed, variant = job
            summary = run_training(CONFIG, [f"seed={seed}", *budget, *extra[variant]], workdir)
            return dict(**shared, seed=seed, variant=variant, config_hash=summary["config_hash"],
                        eval_mean=summary["eval_mean"], steps=steps_to_target(summary["run_dir"], TARGET),
                        backward=summary["backward_samples"], total_flops=summary["total_flops"],
                        pretrain_flops=summary["pretrain_flops"])  # fmt: skip

        def line(row: dict) -> str:
            return str({k: row[k] for k in ("seed", "variant", "eval_mean", "steps", "total_flops")})

        jobs = _harness.interleave(range(1, args.seeds + 1), list(extra))
        return _harness.measure(jobs, figures, args.results, common, line)


def render(rows: list[dict], results: Path) -> str:
    def col(variant: str, key: str) -> list[float]:
        return [r[key] for r in rows if r["variant"] == variant]

    seeds = len(col("scratch", "steps"))
    finite = [t / s for t, s in zip(col("transfer", "steps"), col("scratch", "steps"), strict=True)
              if t != float("inf") and s != float("inf")]  # fmt: skip
    own = {
        v: [r["total_flops"] - r["pretrain_flops"] for r in rows if r["variant"] == v] for v in ("transfer", "scratch")
    }
    table = _report.markdown_table(
        ["evaluator", "seeds reaching -100", "env steps to -100, median (min-max)", "final eval", "backward samples",
         "run's own FLOPs (G), median"],
        [
            [name, f"{sum(x != float('inf') for x in col(v, 'steps'))}/{seeds}",
             _report.fmt_mmm([x for x in col(v, "steps") if x != float("inf")] or [float("nan")]),
             _report.fmt_mmm(col(v, "eval_mean"), "{:.1f}"), _report.fmt_mmm(col(v, "backward")),
             f"{statistics.median(own[v]) / 1e9:,.1f}"]
            for name, v in (("pretrained on CartPole, transferred", "transfer"), ("trained from scratch", "scratch"))
        ],
    )  # fmt: skip
    ratio = f"{statistics.median(finite):.3f}" if finite else "n/a"
    first = rows[0]
    n_transfer = len(col("transfer", "steps"))
    return "\n".join([
        "Claim tested (PivotRL seed document): a CartPole evaluator transferred to MountainCar speeds training up "
        "by 35% after under 1000 fine-tuning steps. Measured here on CartPole -> Acrobot.",
        "",
        *_report.rows_lines(rows, results),
        f"- CartPole evaluator: pretrained on 10k env steps, held-out Spearman {first['evaluator_spearman']:.3f}; "
        "Acrobot budget and pivot settings: `configs/acrobot-pivot.yaml` (warm-up 4096 steps, refresh every 5 "
        "updates).",
        f"- shared cost, listed once: the evaluator's pretraining (a 10k-step CartPole PPO run and the fit), "
        f"{first['evaluator_flops'] / 1e9:,.1f} GFLOPs, used by {n_transfer} transfer runs; the table's FLOPs are "
        "each run's own (train + inference).",
        "",
        table,
        "",
        f"- env steps to the target, transfer / scratch, paired per seed, median: {ratio}"
        " (below 1 means the transferred evaluator got there sooner); per seed: "
        + (", ".join(f"{x:.2f}" for x in finite) or "n/a")
        + f"; sooner on {sum(x < 1 for x in finite)} of {len(finite)} seeds.",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--timesteps", type=int, default=None)
    _report.add_output_args(parser, "pivot_transfer")
    args = parser.parse_args()
    _report.run_or_render("pivot_transfer", args, run, render)


if __name__ == "__main__":
    main()
