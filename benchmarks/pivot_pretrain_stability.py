"""Does a pretrained importance evaluator steady PivotRL's start? Pivot with a pretrained evaluator against
pivot with a fresh one, the same settings, on paired seeds, CartPole-v1 and LunarLander-v3.

The seed document claims "+30% early stability" from pretraining the evaluator. Defined before any run:

- **early stability**: the spread across seeds (standard deviation) of each run's mean training return over
  its first 20% of env steps (the learner's running mean of recent episodes, as ``metrics.jsonl`` logs it
  after each update); the claim holds when the pretrained runs' spread is at most 0.7x the fresh runs'
  (30% steadier), and the pretrained runs do not start lower (their median early return at least the
  fresh runs');
- **steps to the threshold**: the env step at which that training return first reaches the env's
  ``reward_threshold`` (CartPole-v1 475, LunarLander-v3 200), censored at the budget.

Contenders: ``pretrained`` (``selection.settings.evaluator_from`` an evaluator pretrained once per env with
``frugalrl pretrain evaluator`` at the config's ``pretrain_steps``, its CPU-seconds kept once) and ``fresh``
(the config as is: the evaluator starts untrained and learns during the warm-up). Everything else is the
config's. Budgets: CartPole-v1 the config's 100,000 env steps; LunarLander-v3 300,000 of the config's 1M
(the claim is about the start; five pairs at 1M would take about two hours here). Each run is a fresh
``frugalrl train`` process (MLflow off, one thread), seed by seed, the contenders alternating; rows are kept
as each run ends (``benchmarks/results/pivot_pretrain_stability.jsonl``).

    python -m benchmarks.pivot_pretrain_stability --seeds 5 --write
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from . import _harness, _report
from ._pivot import EARLY_SHARE, STABILITY_ENVS, STABILITY_VARIANTS, STEADIER, env_verdict, run_training
from ._report import mmm

NAME = "pivot_pretrain_stability"


def early_figures(run_dir: Path, budget: int, threshold: float) -> dict:
    """The run's mean training return over its first ``EARLY_SHARE`` of ``budget`` env steps, and the env step
    at which its training return first reached ``threshold`` (None: not within the run)."""
    rows = [r for r in _harness.metrics(run_dir) if r.get("episode_return") is not None]
    early = [r["episode_return"] for r in rows if r["step"] <= EARLY_SHARE * budget]
    reached = next((r["step"] for r in rows if r["episode_return"] >= threshold), None)
    curve = [[r["step"], round(r["episode_return"], 2)] for r in rows[:: max(1, len(rows) // 50)]]
    return {"early_return": statistics.mean(early) if early else None, "steps_to_threshold": reached, "curve": curve}


def run_env(env: str, args: argparse.Namespace, common: dict, workdir: Path) -> None:
    """One evaluator pretrained for ``env``, then every (seed, contender) trained: a row as each ends."""
    config, budget, threshold = STABILITY_ENVS[env]
    budget = args.steps or budget
    relative = str(config.relative_to(_report.REPO_ROOT))
    scale = [f"ppo.total_timesteps={budget}"]

    def pretrain(out: Path) -> dict:
        done = _harness.cli(["pretrain", "evaluator", "--config", config, "--out", out], out, scale)
        summary = done.summary
        return {"env": env, "config": relative, "variant": "pretrain", "budget": budget,
                "spearman": summary.get("spearman"), "pretrain_steps": summary.get("real_env_steps"),
                "cpu_s": round(done.cpu_s, 1), "evaluator": str(out / "evaluator.pt")}  # fmt: skip

    def said(row: dict) -> str:
        return f"{env} evaluator: Spearman {row['spearman']:.3f}, {row['cpu_s']:.0f} CPU-s"

    evaluator = _harness.measure([workdir / "evaluator"], pretrain, args.results, common, said)[0]["evaluator"]

    def one(job: tuple[int, str]) -> dict:
        seed, variant = job
        given = [f"selection.settings.evaluator_from={evaluator}"] if variant == "pretrained" else []
        sets = [f"seed={seed}", *scale, *given]
        summary = run_training(config, sets, workdir)
        return {"env": env, "config": relative, "variant": variant, "seed": seed, "budget": budget,
                "threshold": threshold, "overrides": sets, "eval_mean": summary["eval_mean"],
                "real_env_steps": summary["real_env_steps"],
                **early_figures(Path(summary["run_dir"]), budget, threshold)}  # fmt: skip

    def line(r: dict) -> str:
        reached = f"{r['steps_to_threshold']:,}" if r["steps_to_threshold"] is not None else "not reached"
        return (f"{env} seed {r['seed']} {r['variant']:<10} early return {r['early_return']:.1f}, threshold at "
                f"{reached}, eval {r['eval_mean']:.1f}")  # fmt: skip

    _harness.measure(
        _harness.interleave(range(1, args.seeds + 1), list(STABILITY_VARIANTS)), one, args.results, common, line
    )


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common()
    with tempfile.TemporaryDirectory(prefix="pivot-stability-") as tmp:
        for env in args.envs:
            (Path(tmp) / env).mkdir()
            run_env(env, args, common, Path(tmp) / env)
    return [r for r in _report.read_rows(args.results) if r.get("batch") == common["batch"]]


def render(rows: list[dict], results: Path) -> str:
    runs = [r for r in rows if r["variant"] in STABILITY_VARIANTS]
    pre = {r["env"]: r for r in rows if r["variant"] == "pretrain"}
    header = ["env (budget)", "contender", "seeds", "early training return per seed (first 20% of steps)",
              "early spread, SD over seeds", "steps to the threshold, median (runs reaching it)",
              "final eval return, median (min-max)"]  # fmt: skip
    body, verdicts = [], []
    for env in STABILITY_ENVS:
        mine = {v: sorted((r for r in runs if r["env"] == env and r["variant"] == v), key=lambda r: r["seed"])
                for v in STABILITY_VARIANTS}  # fmt: skip
        if not any(mine.values()):
            continue
        for variant, rows_of in mine.items():
            if not rows_of:
                continue
            early = [r["early_return"] for r in rows_of]
            reached = [r["steps_to_threshold"] for r in rows_of if r["steps_to_threshold"] is not None]
            body.append([
                f"{env} ({rows_of[0]['budget']:,}; threshold {rows_of[0]['threshold']:.0f})", variant,
                str(len(rows_of)), " / ".join(f"{e:.1f}" for e in early),
                f"{statistics.stdev(early):.1f}" if len(early) > 1 else "-",
                f"{statistics.median(reached):,.0f} ({len(reached)} of {len(rows_of)})" if reached
                else f"not reached (0 of {len(rows_of)})",
                mmm([r["eval_mean"] for r in rows_of], "{:.1f}"),
            ])  # fmt: skip
        figures, verdict = env_verdict({v: r for v, r in mine.items() if r})
        evaluator = pre.get(env)
        made = (f"; the evaluator: {evaluator['pretrain_steps']:,} env steps of baseline PPO, held-out Spearman "
                f"{evaluator['spearman']:.3f}, {evaluator['cpu_s']:.0f} CPU-s once" if evaluator else "")  # fmt: skip
        verdicts.append(f"- {env}: {figures or 'too few runs'}: **{verdict}**{made}")
    lines = [
        "Does pretraining PivotRL's importance evaluator steady the start? The seed claims +30% early stability. "
        f"Measured as defined before running (the script's docstring): the spread over seeds of each run's mean "
        f"training return over its first {EARLY_SHARE:.0%} of env steps, pretrained evaluator against a fresh one "
        f"(trained during warm-up), all else the config's; confirmed where the pretrained spread is at most "
        f"{STEADIER}x the fresh one's and the pretrained runs do not start lower.",
        "",
        *_report.rows_lines(rows, results),
        "",
        *verdicts,
        "",
        _report.markdown_table(header, body),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=list(STABILITY_ENVS), default=list(STABILITY_ENVS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument("--steps", type=int, default=None, help="one budget for every env (a smoke test)")
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, after=["pivot_pretrained"])


if __name__ == "__main__":
    main()
