"""PivotRL against baseline PPO and two controls matched to it on compute, side by side.

For every (env, seed) the script trains these variants, strictly in this order, each in a fresh
``frugalrl train`` subprocess (MLflow off, one torch thread) with the same seed and env-step budget:

1. ``ppo``       baseline PPO (``selection.kind=all``);
2. ``pivot``     PivotRL as the env's ``configs/*-pivot.yaml`` ships it: the kept samples of the update
                 packed into full-size minibatches (``selection.packing=rollout``, fewer optimizer steps)
                 and the unbiased low band (``selection.settings.p_min`` 0.1: a sample scored under ``low`` is kept with
                 probability p_min and weight 1/p_min);
3. ``pivot_mb``  the rule as first built, for comparison: PPO's minibatches each thinned
                 (``selection.packing=minibatch``, as many optimizer steps as PPO), the low band skipped
                 (``selection.settings.p_min=0``, biased) and thresholds on raw scores
                 (``selection.settings.score=raw``);
4. ``random``    control (a): a uniform random subset, packed (``selection.kind=random``,
                 ``selection.packing=rollout``), ``selection.settings.keep_fraction`` = pivot's backward samples /
                 PPO's backward samples of the same seed;
5. ``epochs``    control (b): fewer passes over the data, the last one fractional (``selection.kind=epochs``),
                 the same ``keep_fraction``;
6. ``pivot_adv`` (``--labels``) ``pivot`` with the ``|advantage|`` label (``selection.settings.label=advantage``).

``--without pivot_mb epochs`` leaves those two out (the MountainCar row needs PPO, pivot and the random skip).

So the controls are matched to pivot on backward samples and (nearly) on optimizer steps, not on a
rounded epoch count: the question is whether choosing *which* states get compute matters.

Timed figure, "train wall-clock": ``summary.json``'s ``wall_s - eval_s``, i.e. the cost meter's clock
(started right after the vector env is built) to the end of the run, minus the final evaluation: agent
construction, every rollout and update, evaluator scoring and refreshes, checkpoint writes and the
policy export. Process start and imports are not in it. Chains of different (env, seed) run one after
another by default (``--workers 1``); with ``--workers N`` they run N at a time and the report says
that the wall-clock figures were measured with N chains in parallel.

Reported per env: eval return (20 deterministic episodes, fixed seeds) median (min-max), and for return,
backward samples, optimizer steps, training FLOPs (evaluator scoring, evaluator training and labels
included) and train wall-clock the ratio to PPO: the median (min-max) of the per-seed ratios and the ratio
of the medians. The return ratio is measured above a random policy. Also the evaluator's share of FLOPs.
Targets: CartPole-v1 and Acrobot-v1, pivot's train wall-clock <= 0.6x PPO's at a return ratio >= 0.98;
LunarLander-v3, pivot's median return above both controls' at equal wall-clock; MountainCar-v0, none.

Every run appends one JSON row to ``benchmarks/results/pivot_vs_ppo.jsonl`` as soon as it finishes (env,
seed, variant, overrides, the summary figures, train_s, load average before/after, timestamp, git commit,
command line, a ``batch`` id shared by one invocation). ``--report-only`` renders the newest batch per env
from that file without running anything; ``--write`` puts the section ``pivot_vs_ppo`` into
``docs/benchmarks.md``. The section shows every env in the results file: after a run, that run's batch for
the envs it ran and the newest stored batch for the others (each env's header names its batch).

Run from the repository root, one run at a time. Run times for 5 seeds with ``--labels`` on 2 cores are
estimates, not measured end to end: smoke runs here took about 3-4 s of process start, setup and evaluation
per run, plus per env step (PPO / pivot, steady state) CartPole 155 / 115 us, Acrobot 160 / 105 us,
LunarLander 200 / 160 us, MountainCar 175 / 120 us; scaled to the configs' budgets (100k, 200k, 1M, 1M)::

    nohup python -m benchmarks.pivot_vs_ppo --env CartPole-v1 Acrobot-v1 --labels --write \
        > /tmp/pivot_vs_ppo_small.log 2>&1 &      # about 25-40 minutes (CartPole ~10-15 of them)
    nohup python -m benchmarks.pivot_vs_ppo --env LunarLander-v3 MountainCar-v0 --labels --write \
        > /tmp/pivot_vs_ppo_large.log 2>&1 &      # about 2.5-3.5 hours (~15 min per seed and env)
    python -m benchmarks.pivot_vs_ppo --report-only --write   # re-render the newest batch of every env

Run the two commands one after the other, not at once (two at once would spoil the wall-clock figures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

from . import _harness, _report
from ._pivot import CONFIGS, random_policy_return, run_figures
from ._report import mmm

SECTION = "pivot_vs_ppo"
VARIANT_ORDER = ("ppo", "pivot", "pivot_mb", "random", "epochs", "pivot_adv")
CONTROLS = ("random", "epochs")
DESCRIPTIONS = {
    "ppo": "`ppo`: PPO (all samples)",
    "pivot": "`pivot`: PivotRL, packed, unbiased low band",
    "pivot_mb": "`pivot_mb`: PivotRL as first built (thinned minibatches, low band skipped)",
    "random": "`random`: control (a), random subset of pivot's size, packed",
    "epochs": "`epochs`: control (b), fewer epochs (last one fractional), pivot's size",
    "pivot_adv": "`pivot_adv`: PivotRL, abs-advantage label",
}
TARGET_WALL = 0.6  # CartPole / Acrobot: pivot train wall-clock / PPO at most this ...
TARGET_RETURN = 0.98  # ... at a return ratio of at least this
EQUAL_WALL = 0.1  # LunarLander: a control more than 10% faster than pivot is not "at equal wall-clock"


# --------------------------------------------------------------------------- running
def line(row: dict) -> str:
    opt = row["optimizer_steps"]
    return (f"{row['env']:<15} seed {row['seed']}  {row['variant']:<9} eval {row['eval_mean']:8.1f}  "
            f"backward {row['backward_samples']:>11,}  opt steps {opt if opt is not None else '-':>7}  "
            f"train_s {row['train_s']:7.1f}  load {row['load_after']}")  # fmt: skip


def run_chain(env_id: str, seed: int, args: argparse.Namespace, common: dict, workdir: Path) -> None:
    """The variants of one (env, seed), in order; each row is written as soon as its run ends."""
    config = _report.REPO_ROOT / "configs" / CONFIGS[env_id]
    scale = [f"ppo.total_timesteps={args.timesteps}"] if args.timesteps else []

    def run(variant: str, overrides: list[str], extra: dict | None = None) -> dict:
        def figures(_: str) -> dict:
            return run_figures(env_id, config, seed, variant, [f"seed={seed}", *scale, *overrides], workdir, extra)

        return _harness.measure([variant], figures, args.results, common, line)[0]

    base = run("ppo", ["selection.kind=all"])
    pivot = run("pivot", [])
    if "pivot_mb" not in args.without:
        run("pivot_mb", ["selection.packing=minibatch", "selection.settings.p_min=0", "selection.settings.score=raw"])
    kept = min(1.0, max(1e-4, pivot["backward_samples"] / base["backward_samples"]))
    matched = {"keep_fraction": kept}
    run("random", ["selection.kind=random", f"selection.settings.keep_fraction={kept:.4f}",
                   "selection.packing=rollout"], matched)  # fmt: skip
    if "epochs" not in args.without:
        run("epochs", ["selection.kind=epochs", f"selection.settings.keep_fraction={kept:.4f}"], matched)
    if args.labels:
        run("pivot_adv", ["selection.settings.label=advantage"])


# --------------------------------------------------------------------------- report
class Ratio:
    """``variant / reference`` of one figure, paired by seed: per-seed ratios and the ratio of medians.
    ``floor`` is subtracted from both sides first (returns: measured above a random policy)."""

    def __init__(self, rows: dict, variant: str, reference: str, key: str, floor: float = 0.0):
        seeds = sorted(s for v, s in rows if v == variant and (reference, s) in rows)
        mine, theirs = ({s: rows[(v, s)].get(key) for s in seeds} for v in (variant, reference))
        paired = _report.paired_ratio(_report.pair_up(mine, theirs), floor)
        self.per_seed, self.of_medians, self.median = paired.per_seed, paired.of_medians, paired.median
        self.n, self.seeds = len(self.per_seed), len(seeds)

    def cell(self, fmt: str) -> str:
        if not self.per_seed:
            return "-"
        text = f"{mmm(self.per_seed, fmt)}; of medians {fmt.format(self.of_medians)}"
        return text + (f" [{self.n}/{self.seeds} seeds]" if self.n < self.seeds else "")

    def text(self, fmt: str) -> str:
        """For verdict lines: ``median of per-seed ratios (min-max; ratio of medians)``."""
        if not self.per_seed:
            return "not measured"
        lo, hi, of_medians = (fmt.format(v) for v in (min(self.per_seed), max(self.per_seed), self.of_medians))
        return f"{fmt.format(self.median)} (min {lo}, max {hi}; ratio of medians {of_medians})"


def by_variant_seed(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """{(variant, seed): row}; a later row wins a duplicate."""
    return {(r["variant"], r["seed"]): r for r in rows}


def env_table(env_id: str, rows: list[dict], floor: float) -> tuple[str, dict]:
    keyed = by_variant_seed(rows)
    variants = [v for v in VARIANT_ORDER if any(k[0] == v for k in keyed)]
    header = ["variant", "seeds", "eval return, median (min-max)", "return ratio to PPO", "backward samples / PPO",
              "optimizer steps / PPO", "train FLOPs / PPO", "train wall-clock / PPO",
              "evaluator share of FLOPs"]  # fmt: skip
    body, figures = [], {}
    for variant in variants:
        mine = [r for (v, _), r in sorted(keyed.items()) if v == variant]
        returns = [r["eval_mean"] for r in mine]
        ratios = {
            "return": Ratio(keyed, variant, "ppo", "eval_mean", floor),
            "backward": Ratio(keyed, variant, "ppo", "backward_samples"),
            "optimizer": Ratio(keyed, variant, "ppo", "optimizer_steps"),
            "flops": Ratio(keyed, variant, "ppo", "train_flops"),
            "wall": Ratio(keyed, variant, "ppo", "train_s"),
        }
        if variant in CONTROLS:  # control / pivot, for the LunarLander target
            ratios["wall_to_pivot"] = Ratio(keyed, variant, "pivot", "train_s")
        share = [r["aux_flops"] / r["train_flops"] for r in mine if r.get("train_flops")]
        figures[variant] = {"median_return": statistics.median(returns), "seeds": len(mine), **ratios}
        cells = [DESCRIPTIONS[variant], str(len(mine)), mmm(returns, "{:,.1f}")]
        if variant == "ppo":
            cells += ["1"] * 5
        else:
            cells += [ratios["return"].cell("{:.3f}"), ratios["backward"].cell("{:.3f}"),
                      ratios["optimizer"].cell("{:.3f}"), ratios["flops"].cell("{:.3f}"),
                      ratios["wall"].cell("{:.2f}")]  # fmt: skip
        cells.append(mmm(share, "{:.2%}") if variant.startswith("pivot") and share else "-")
        body.append(cells)
    return _report.markdown_table(header, body), figures


def verdict(env_id: str, fig: dict, budget_note: str, workers: int) -> str:
    if "pivot" not in fig or "ppo" not in fig:
        return "pivot or PPO not measured: no verdict"
    p = fig["pivot"]
    parallel = f" (wall-clock measured with {workers} chains in parallel)" if workers > 1 else ""
    if env_id in ("CartPole-v1", "Acrobot-v1"):
        wall, ret = p["wall"], p["return"]

        def met(w: float, r: float) -> bool:
            return w <= TARGET_WALL and r >= TARGET_RETURN

        ok = met(wall.median, ret.median)
        text = (
            f"**Target: pivot's train wall-clock <= {TARGET_WALL}x PPO's at a return ratio >= {TARGET_RETURN}. "
            f"Measured (median of per-seed ratios): wall-clock {wall.text('{:.2f}')}{parallel}, return ratio "
            f"{ret.text('{:.3f}')}: {'met' if ok else 'missed'}.**"
        )
        if met(wall.of_medians, ret.of_medians) != ok:
            text += f" The ratios of medians would have {'missed' if ok else 'met'} it."
        text += f" Pivot's optimizer steps / PPO: {p['optimizer'].text('{:.3f}')}."
        return text + budget_note
    if env_id == "LunarLander-v3":
        controls = [c for c in CONTROLS if c in fig]
        ok = len(controls) == len(CONTROLS) and all(p["median_return"] > fig[c]["median_return"] for c in controls)
        walls = "; ".join(f"{c} / pivot {fig[c]['wall_to_pivot'].text('{:.2f}')}" for c in controls)
        # A control that took more time than pivot and still scored lower does not weaken pivot's lead; one
        # that took clearly less does: then pivot's lead over it was not measured at equal wall-clock.
        unequal = [c for c in controls if fig[c]["wall_to_pivot"].median < 1 - EQUAL_WALL]
        text = (
            "**Target: pivot's median return above both controls' at equal wall-clock. Measured: median return "
            f"pivot {p['median_return']:.1f}, "
            + ", ".join(f"{c} {fig[c]['median_return']:.1f}" for c in controls)
            + f": {'met' if ok else 'missed'}.** Train wall-clock, control / pivot (median of per-seed ratios): "
            f"{walls or 'controls not measured'}{parallel}."
        )
        if unequal:
            text += (
                f" {', '.join(f'`{c}`' for c in unequal)} took more than {EQUAL_WALL:.0%} less train wall-clock than "
                "pivot, so against it the returns were not compared at equal wall-clock."
            )
        return text + budget_note
    return "No target for this env; figures as measured." + budget_note


def render(rows: list[dict], results: Path) -> str:
    """The section: one table per env of ``rows`` (each env's rows are one batch)."""
    batches = {env: [r for r in rows if r.get("env") == env] for env in CONFIGS}
    batches = {env: mine for env, mine in batches.items() if mine}
    all_rows = sorted((r for rows in batches.values() for r in rows), key=lambda r: r["timestamp"])
    workers = max(int(r.get("workers") or 1) for r in all_rows)
    lines = [
        "Claim tested (PivotRL seed document): about 50% less compute with under 2% loss of return on "
        "CartPole, LunarLander and MountainCar. Here compute is counted as backward samples, optimizer steps, "
        "training FLOPs and train wall-clock.",
        "",
        *_report.rows_lines(all_rows, results),
        "- variants per (env, seed), in this order, each a fresh `frugalrl train` process (MLflow off, one torch "
        "thread), same seed and env steps: `ppo` (`selection.kind=all`); `pivot` (the env's `configs/*-pivot.yaml` "
        "as is: kept samples packed into full minibatches, unbiased low band); `pivot_mb` "
        "(`selection.packing=minibatch`, `selection.settings.p_min=0`, `selection.settings.score=raw`: the rule "
        "as first built); `random` and `epochs` (controls (a) and (b), `selection.settings.keep_fraction` = "
        "pivot's backward samples / PPO's of that seed; `random` packed per rollout, `epochs` with a fractional "
        "last epoch); `pivot_adv` (`selection.settings.label=advantage`) where run.",
        "- train wall-clock: `summary.json` `wall_s - eval_s` (cost meter started after the vector env is built; "
        "agent construction, rollouts, updates, evaluator work, checkpoints and policy export; final evaluation "
        "excluded). "
        + (
            f"**Measured with {workers} chains in parallel** on {all_rows[0].get('machine', {}).get('nproc', '?')} "
            "CPUs: the wall-clock figures include that contention."
            if workers > 1
            else "One run at a time (`--workers 1`)."
        ),
        "- ratio cells: median (min-max) of the per-seed ratios (variant / PPO of the same seed); then the ratio "
        "of the medians. The return ratio is measured above a random policy: (R - R_random) / (R_PPO - R_random), "
        "so it reads the same for envs with negative returns (R_random: uniform random actions on the same 20 "
        "eval seeds). Evaluator share: evaluator scoring, training and label FLOPs / training FLOPs.",
        "- Other processes may share the machine; see the load average.",
        "",
    ]
    for env_id in [e for e in CONFIGS if e in batches]:
        rows = batches[env_id]
        floor = random_policy_return(env_id)
        table, fig = env_table(env_id, rows, floor)
        steps = sorted({r["real_env_steps"] for r in rows})
        budget = rows[0]["timesteps"]
        default = default_timesteps(env_id)
        budget_note = ""
        if budget != default:
            budget_note = f" (Budget {budget:,} env steps, not the config's {default:,}: not a check of the target.)"
        ppo = [r for r in rows if r["variant"] == "ppo"]
        compiles = sorted({str(r.get("compile")) for r in rows})
        lines += [
            f"#### {env_id} ({'/'.join(f'{s:,}' for s in steps)} env steps per run; random policy {floor:.1f}; "
            f"batch `{rows[0]['batch']}`)",
            "",
            table,
            "",
            "- " + verdict(env_id, fig, budget_note, workers),
        ]
        if ppo:
            lines.append(
                f"- PPO itself: train wall-clock {mmm([r['train_s'] for r in ppo], '{:.1f}')} s, optimizer steps "
                f"{mmm([r['optimizer_steps'] for r in ppo if r.get('optimizer_steps') is not None], '{:,.0f}')}; "
                f"learner step kind (`compile`): {', '.join(compiles)}."
            )
        lines.append("")
    return "\n".join(lines)


def default_timesteps(env_id: str) -> int:
    cfg = yaml.safe_load((_report.REPO_ROOT / "configs" / CONFIGS[env_id]).read_text())
    return int(cfg["ppo"]["total_timesteps"])


# --------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", "--envs", nargs="+", dest="env", default=None, choices=list(CONFIGS),
                        help="envs to run (default: all four) or, with --report-only, to render (default: all in "
                        "the results file)")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument(
        "--seeds-per-env", nargs="*", default=[], metavar="ENV=N", help="fewer seeds for an env: LunarLander-v3=3"
    )
    parser.add_argument("--workers", type=int, default=1,
                        help="chains (env, seed) run in parallel; above 1 the wall-clock figures suffer")  # fmt: skip
    parser.add_argument("--timesteps", type=int, default=None,
                        help="override every env's budget (smoke runs; MountainCar at its pilot's budget)")  # fmt: skip
    parser.add_argument("--labels", action="store_true", help="also run pivot with the |advantage| label")
    parser.add_argument("--without", nargs="+", default=[], choices=["pivot_mb", "epochs"],
                        help="leave these variants out (ppo, pivot and the random control always run)")  # fmt: skip
    _report.add_output_args(parser, SECTION)
    args = parser.parse_args()

    def select(stored: list[dict], args: argparse.Namespace) -> list[dict]:
        """The newest batch of every env asked for (default: every env in the file)."""
        rows = []
        for env_id in args.env or [e for e in CONFIGS if any(r.get("env") == e for r in stored)]:
            match = {"env": env_id, **({"timesteps": args.timesteps} if args.timesteps else {})}
            rows += _report.newest_batch(stored, **match)
            if not _report.newest_batch(stored, **match):
                at = f" at {args.timesteps:,} env steps" if args.timesteps else ""
                print(f"{env_id}: no rows{at} in {args.results}; skipped", file=sys.stderr)
        return rows

    def run(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common(workers=args.workers)
        limits = {item.split("=")[0]: int(item.split("=")[1]) for item in args.seeds_per_env}
        chains = [(env, seed) for env in args.env or list(CONFIGS)
                  for seed in range(1, min(args.seeds, limits.get(env, args.seeds)) + 1)]  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="pivot-vs-ppo-") as tmp:
            _harness.parallel(lambda chain: run_chain(*chain, args, common, Path(tmp)), chains, args.workers)
        # The section shows every env: this batch for the envs just run, the newest stored batch for the others.
        stored = _report.read_rows(args.results)
        mine = [r for r in stored if r.get("batch") == common["batch"]]
        return [r for env in CONFIGS for r in [r for r in mine if r.get("env") == env] or _report.newest_batch(
            stored, env=env)]  # fmt: skip

    _report.run_or_render(SECTION, args, run, render, select)


if __name__ == "__main__":
    main()
