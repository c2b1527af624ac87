"""Which importance signal beats random skipping of the same size? (issue 33, item 3)

Every contender but ``ppo`` keeps the same share of each epoch's samples (``--keep``, random skipping's
rule ``ceil(keep * n)``) and packs them into full minibatches (``selection.packing: rollout``), so all of
them run the same backward samples and optimizer steps; only *which* samples get them differs:

- ``ppo``: every sample (``selection.kind=all``), for scale;
- ``random``: a uniform random subset (``selection.kind=random``), the control every signal must beat;
- ``pivot``: the seed's evaluator, trained from scratch in the run (no pretraining step, no warm-up:
  refreshed on the first rollout and every ``pivot_refresh`` updates), its rank scores cut at
  ``1 - keep`` with no middle band and no low band (``high = low = 1 - keep``, ``p_min 0``): the top
  ``keep`` of the rollout by score, with the default ``policy_gradient`` label;
  ``--evaluator-from PATH`` starts both pivot contenders from an evaluator made beforehand by ``frugalrl
  pretrain evaluator --config configs/lunarlander-pivot.yaml --out DIR`` (its pretraining FLOPs are booked
  by the run as ``pretrain_flops``; rows of another evaluator are another setup);
- ``pivot_grad``: the same with the ``grad_norm`` label (the seed's gradient saliency taken literally,
  which the evaluator predicts best in ``pivot_labels``; about one backward pass per sample at each refresh);
- ``advantage_top``, ``advantage_proportional``, ``value_error``, ``clipped_ratio``: the free signals of
  ``frugalrl.signals`` (docs/pivot.md, "Free signals").

Envs: LunarLander-v3 (``configs/lunarlander-ppo.yaml``) and BipedalWalker-v3 (``configs/bipedalwalker-ppo.yaml``,
RL Zoo's PPO settings), each at the budget in ``ENVS`` unless ``--steps``. Runs go seed by seed, every
contender once per seed (A B A B), each a fresh ``frugalrl train`` process (MLflow off, one torch thread);
each run's row is appended to ``benchmarks/results/selection_signals.jsonl`` as it ends: eval return,
mean training return, backward samples, optimizer steps, CPU-seconds (``os.wait4``), train seconds, and the
signal's own cost (the samples and FLOPs of its phases: ``signal_forward`` for the rescoring signals; the
evaluator's scoring, fit and labels for ``pivot``).

Verdict per env: a contender beats random skipping when, over at least 5 paired seeds at equal backward
samples and optimizer steps, the 95% stratified-bootstrap interval of its eval-return IQM lies wholly
above random's. The paired difference (contender - random: difference of medians / median of per-seed
differences) is shown beside it.

    python -m benchmarks.selection_signals --envs LunarLander-v3 BipedalWalker-v3 --seeds 5 --write

Cost, measured: on LunarLander a run is 71-84 CPU-s (PPO 100; 40 runs, seeds 1-5); on BipedalWalker
(2M steps, 32 envs) a skipping run is 590-710 CPU-s and full PPO about 810 (131,072 steps took 53 CPU-s),
so the 4 contenders run there (``--contenders random advantage_proportional advantage_top pivot``) x 5
seeds are about 3.7 CPU-hours, 1.9 hours on 2 workers. ``--contenders`` and ``--first-seed`` run a part;
rows of the same env, budget and keep fraction add up by seed.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from . import _harness, _report
from ._signals import CONTENDERS, ENVS, MIN_SEEDS, NAME, SIGNALS, return_ci

# the cost meter's phases that are a contender's own selection work (beyond the learner's passes)
OWN_PHASES = ("signal_forward", "evaluator_score", "evaluator_train", "label")


def overrides(contender: str, keep: float, env_id: str, evaluator_from: str | None = None) -> list[str]:
    """The ``--set`` overrides of one contender at keep fraction ``keep`` (``evaluator_from``: the pivot
    contenders start from that pretrained evaluator, whose pretraining cost the run books)."""
    if contender == "ppo":
        return ["selection.kind=all"]
    packed = ["selection.packing=rollout"]
    if contender in ("random", *SIGNALS):
        return [f"selection.kind={contender}", f"selection.settings.keep_fraction={keep}", *packed]
    cut = 1.0 - keep  # rank scores are quantiles: at or above 1 - keep is the top keep of the rollout
    label = "grad_norm" if contender == "pivot_grad" else "policy_gradient"
    refresh = ENVS[env_id]["pivot_refresh"]
    pivot = {"label": label, "score": "rank", "high": cut, "low": cut, "p_min": 0, "min_full_fraction": 0,
             "threshold_boost": 0, "warmup_steps": 0, "refresh_every_updates": refresh}  # fmt: skip
    if evaluator_from:
        pivot["evaluator_from"] = evaluator_from
    return ["selection.kind=pivot", *[f"selection.settings.{k}={v}" for k, v in pivot.items()], *packed]


def own_cost(summary: dict) -> tuple[int, float]:
    """(samples, FLOPs) of the contender's own selection phases in ``summary.json``."""
    phases = {p: v for p, v in summary.get("flops_by_phase", {}).items() if p in OWN_PHASES}
    return sum(v["samples"] for v in phases.values()), sum(v["flops"] for v in phases.values())


def run_one(env_id: str, seed: int, contender: str, args: argparse.Namespace, workdir: Path) -> dict:
    """One ``frugalrl train`` of ``contender``: its figures for the row."""
    steps = args.steps or ENVS[env_id]["steps"]
    own = overrides(contender, args.keep, env_id, args.evaluator_from)
    sets = [f"seed={seed}", f"ppo.total_timesteps={steps}", *args.set, *own]
    run = _harness.train(_report.REPO_ROOT / "configs" / ENVS[env_id]["config"],
                         Path(tempfile.mkdtemp(dir=workdir)) / "run", sets)  # fmt: skip
    summary = run.summary
    rows = list(run.metrics())
    returns = [r["episode_return"] for r in rows if r.get("episode_return") is not None]
    short = [v for v in (r.get("clipped_ratio_short") for r in rows) if isinstance(v, float) and not math.isnan(v)]
    samples, flops = own_cost(summary)
    return {
        "env_id": env_id, "contender": contender, "seed": seed, "timesteps": steps, "keep_fraction": args.keep,
        "extra_sets": list(args.set), "overrides": sets, "eval_mean": summary["eval_mean"],
        "mean_train_return": sum(returns) / len(returns) if returns else None,
        "real_env_steps": summary["real_env_steps"], "backward_samples": summary["backward_samples"],
        "optimizer_steps": summary["optimizer_steps"], "cpu_s": run.cpu_s,
        "train_s": summary["wall_s"] - summary["eval_s"], "total_flops": summary["total_flops"],
        "pretrain_flops": summary.get("pretrain_flops"), "evaluator_from": args.evaluator_from,
        "own_samples": samples, "own_flops": flops,
        "own_phases": {p: v for p, v in summary.get("flops_by_phase", {}).items() if p in OWN_PHASES},
        "clipped_short": sum(short) / len(short) if short else None, "compile": summary.get("compile"),
    }  # fmt: skip


def _line(row: dict) -> str:
    return (f"{row['env_id']} {row['contender']:<22} seed {row['seed']}: eval {row['eval_mean']:8.1f}  backward "
            f"{row['backward_samples']:>11,}  opt steps {row['optimizer_steps']:>7,}  {row['cpu_s']:.0f} CPU-s  "
            f"own {row['own_samples']:,} samples")  # fmt: skip


# --------------------------------------------------------------------------- report
def _equal_size(paired: list[dict], contender: str) -> float:
    """The largest relative difference from random's backward samples or optimizer steps over the pairs."""
    gaps = [abs(p[contender][k] - p["random"][k]) / max(p["random"][k], 1)
            for p in paired for k in ("backward_samples", "optimizer_steps")]  # fmt: skip
    return max(gaps, default=0.0)


def env_section(env_id: str, rows: list[dict]) -> list[str]:
    names = [c for c in CONTENDERS if any(r["contender"] == c for r in rows)]
    intervals = {c: return_ci([r["eval_mean"] for r in rows if r["contender"] == c]) for c in names}
    table = []
    for name in names:
        mine = [r for r in rows if r["contender"] == name]
        point, low, high = intervals[name]
        own = [r["own_flops"] / r["total_flops"] for r in mine if r.get("total_flops")]
        table.append([
            f"`{name}`", str(len(mine)), _report.mmm([r["eval_mean"] for r in mine], "{:.1f}"),
            f"{point:.1f} [{low:.1f}, {high:.1f}]",
            _report.mmm([r["mean_train_return"] for r in mine if r["mean_train_return"] is not None], "{:.1f}"),
            _report.fmt_mmm([r["backward_samples"] for r in mine]),
            _report.fmt_mmm([r["optimizer_steps"] for r in mine]),
            _report.fmt_mmm([r["cpu_s"] for r in mine]), _report.fmt_mmm([r["own_samples"] for r in mine]),
            _report.mmm(own, "{:.2%}"),
        ])  # fmt: skip
    budget = rows[0]["timesteps"]
    lines = [f"**{env_id}** ({budget:,} env steps per run, keep fraction {rows[0]['keep_fraction']}"
             + (f", extra settings `{' '.join(rows[0]['extra_sets'])}`" if rows[0]["extra_sets"] else "")
             + (f", pivot's evaluator from `{rows[0]['evaluator_from']}`" if rows[0].get("evaluator_from") else "")
             + ")", "",
             _report.markdown_table(["contender", "seeds", "eval return, median (min-max)", "eval IQM [95% interval]",
                                     "mean training return", "backward samples", "optimizer steps", "CPU-s",
                                     "own samples", "own FLOPs / total"], table), ""]  # fmt: skip
    if "random" not in names:
        return [*lines, "- random skipping not measured: no verdict.", ""]
    beats = []
    for name in [n for n in names if n not in ("ppo", "random")]:
        paired, _ = _report.by_seed(rows, [name, "random"])
        diff = _report.paired_difference([(p[name]["eval_mean"], p["random"]["eval_mean"]) for p in paired])
        higher = sum(d > 0 for d in diff.per_seed)
        gap = _equal_size(paired, name)
        above = intervals[name][1] > intervals["random"][2]
        verdict = "interval above random's" if above else "intervals overlap or below"
        if len(paired) < MIN_SEEDS:
            verdict += f" (only {len(paired)} paired seeds, {MIN_SEEDS} needed)"
        elif gap > 0.01:
            verdict += f" (not at equal size: {gap:.1%} off random's backward samples or optimizer steps)"
        elif above:
            beats.append(name)
        lines.append(f"- `{name}` - `random`, eval return over {len(paired)} paired seeds: {diff.text('{:+.1f}')} "
                     f"(difference of medians / median of per-seed differences; higher on {higher} of "
                     f"{len(paired)}); size off random's by at most {gap:.2%}: {verdict}.")  # fmt: skip
    lines.append(f"- **Beats random skipping on {env_id}: {', '.join(f'`{b}`' for b in beats) or 'none'}.**")
    if budget != ENVS[env_id]["steps"] or rows[0]["extra_sets"]:
        lines.append(f"- Budget or settings not the script's ({ENVS[env_id]['steps']:,} env steps, no extra "
                     "settings): not a check of the claim.")  # fmt: skip
    return [*lines, ""]


def report(rows: list[dict], results: Path) -> str:
    lines = [
        "Does choosing which samples get backward passes beat choosing them at random, at equal backward samples "
        "and optimizer steps? Every contender but `ppo` keeps the same share of each epoch's samples, packed into "
        "full minibatches; eval return over 20 deterministic episodes (LunarLander) or 10 (BipedalWalker). IQM "
        "interval: 95% stratified bootstrap over seeds. Own samples and FLOPs: the contender's selection work "
        "beyond the learner's passes (rescoring forwards; the evaluator's scoring, fit and labels).",
        "",
    ]
    for env_id in [e for e in ENVS if any(r["env_id"] == e for r in rows)]:
        lines += env_section(env_id, [r for r in rows if r["env_id"] == env_id])
    return "\n".join([*lines, *_report.rows_lines(rows, results)])


def _setup(row: dict) -> tuple:
    return row["env_id"], row["timesteps"], row["keep_fraction"], tuple(row["extra_sets"]), row.get("evaluator_from")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run first-seed .. first-seed + seeds - 1")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=list(CONTENDERS))
    parser.add_argument("--keep", type=float, default=0.4, help="the keep fraction of every skipping contender")
    parser.add_argument("--steps", type=int, default=None, help="override every env's budget (smoke runs)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra overrides of every run (smoke runs: env.num_envs=2 ppo.num_steps=256)")  # fmt: skip
    parser.add_argument("--evaluator-from", default=None, metavar="PATH",
                        help="pivot contenders start from this evaluator (`frugalrl pretrain evaluator`)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1)
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common(workers=args.workers)
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        jobs = [(env, seed, c) for env in args.envs for seed, c in _harness.interleave(seeds, args.contenders)]
        with tempfile.TemporaryDirectory(prefix="selection-signals-") as workdir:
            mine = _harness.measure(jobs, lambda job: run_one(*job, args, Path(workdir)), args.results, common,
                                    line=_line, workers=args.workers)  # fmt: skip
        return select(_report.read_rows(args.results), args, {_setup(r) for r in mine})

    def select(stored: list[dict], args: argparse.Namespace, setups: set | None = None) -> list[dict]:
        """Per env, every kept row of the setup (budget, keep fraction, extra settings) of its newest row, or of
        the setups just run: rows of one setup add up by seed across invocations."""
        if setups is None:
            setups = {_setup([r for r in stored if r["env_id"] == env][-1]) for env in ENVS
                      if any(r["env_id"] == env for r in stored)}  # fmt: skip
        latest = {(_setup(r), r["contender"], r["seed"]): r for r in stored if _setup(r) in setups}  # a rerun wins
        return sorted(latest.values(), key=lambda r: str(r.get("timestamp")))

    empty = (f"_No rows in `benchmarks/results/{NAME}.jsonl` yet: not measured. The command is in "
             "`benchmarks/selection_signals.py` and docs/pivot.md, \"Free signals\"._")  # fmt: skip
    _report.run_or_render(NAME, args, run, report, select, after=["pivot_vs_ppo"], empty=empty)


if __name__ == "__main__":
    main()
