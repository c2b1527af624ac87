"""The demo's Atari game at the demo's budget: the latent curriculum against pixel PPO and against its own
recipe 100% real, at equal training CPU-seconds, scored over full games.

``make demo`` registers a RoadRunner policy trained by the latent curriculum (``configs/roadrunner-latent.yaml``,
the quick profile's Atari stage). Beating the random policy says little on its own: a user paying for that
minute and a half of CPU wants to know what pixel PPO would have made of the same CPU, and whether the imagined
steps add anything over spending it all on real ones. Protocol, as ``atari_equal_cpu.py``'s:

- every run gets the same training budget in CPU-seconds of its process (``--cpu-budget-s``, every thread,
  set-up included, evaluation apart), one torch thread. Unlike there, the latent runs pretrain their encoder
  and world model inside the run, on 2,048 random-play frames, so that cost is inside the budget and nothing
  is amortised;
- contenders: ``pixel`` (PPO with the Nature CNN at CleanRL's settings, ``configs/atari100k-ppo.yaml``, as
  its users would run it), ``real`` (the demo's recipe with every step real), ``stages`` (the demo's recipe
  as shipped: the seed's 3 stages);
- the step budget (``--steps-per-cpu-s`` times the CPU budget) only sets where the learning rate's annealing
  ends; it is set about 10% above each contender's rate on the host, so the CPU budget ends the run. A run
  its step cap ended first is kept but not compared (``stopped_by_cpu_budget``), as in the 20-minute table;
- scored as the field scores: 30 full games per run (all lives, sticky actions 0.25, the 108k-frame cap, no
  automatic FIRE), stochastic policy; IQM with a 95% stratified-bootstrap interval over runs (seeds).

Rows are kept as each run ends (``benchmarks/results/demo_game_equal_cpu.jsonl``); the table renders every row
at the newest budget.

    python -m benchmarks.demo_game_equal_cpu --seeds 1 2 3 4 5 --workdir runs/demo_game_equal_cpu --write
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path

from . import _harness, _report
from ._atari import REFERENCES
from ._equal_cpu import (
    MIN_RUNS_FOR_INTERVAL,
    PROTOCOL,
    by_contender,
    capped_lines,
    contender_table,
    curriculum_lines,
    latest,
    parse_rates,
    plot_curves,
    step_cap,
    threshold_lines,
    train_row,
)

NAME = "demo_game_equal_cpu"
DEMO_CONFIG = _report.REPO_ROOT / "configs" / "roadrunner-latent.yaml"
PIXEL_CONFIG = _report.REPO_ROOT / "configs" / "atari100k-ppo.yaml"
CONFIGS = {"pixel": PIXEL_CONFIG, "real": DEMO_CONFIG, "stages": DEMO_CONFIG}
OVERRIDES = {
    "pixel": ["device=cpu"],
    "real": ["latent.curriculum.stages=[{virtual_fraction: 0.0, real_share: 1.0}]"],
    "stages": [],
}
# Real agent steps per training CPU-second, about 10% above what the contenders made in 90 CPU-s on this
# project's 2-core Intel Xeon host (seed 1: pixel 20,480 steps, 100% real 68,608, the 3 stages 69,632; the
# latent runs' pretraining and set-up, 28-31 CPU-s, included), so the CPU budget, not the step cap, ends a run.
STEPS_PER_CPU_S = {"pixel": 250, "real": 840, "stages": 850}
DESCRIPTIONS = {
    "pixel": "pixel PPO (Nature CNN, CleanRL settings)",
    "real": "latent, encoder pretrained in the run, 100% real",
    "stages": "latent, encoder pretrained in the run, seed's 3 stages (the demo's recipe)",
}
FIGURE = _report.REPO_ROOT / "docs" / "images" / "demo_game_equal_cpu.png"


def run_one(variant: str, seed: int, args: argparse.Namespace, workdir: Path) -> dict:
    """One ``frugalrl train`` of a contender at the CPU budget; the figures of its row."""
    out = _harness.fresh_dir(workdir / f"{args.game.split('/')[-1]}-{variant}-{seed}")
    steps_key = "ppo.total_timesteps" if variant == "pixel" else "total_real_steps"
    sets = [f"env.id={args.game}", f"seed={seed}", f"cpu_budget_s={args.cpu_budget_s}",
            f"{steps_key}={step_cap(variant, args)}", f"eval.episodes={args.eval_episodes}",
            *OVERRIDES[variant]]  # fmt: skip
    row = train_row(CONFIGS[variant], out, sets, args.game, variant, seed, args)
    return {**row, "config": _report.portable(str(CONFIGS[variant]))}


def run(args: argparse.Namespace) -> list[dict]:
    args.common = _report.batch_common(protocol=PROTOCOL, eval_episodes=args.eval_episodes)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="demo-game-equal-cpu-"))
    workdir.mkdir(parents=True, exist_ok=True)
    done = {
        (r["variant"], r["seed"])
        for r in _report.read_rows(args.results)
        if r.get("cpu_budget_s") == args.cpu_budget_s and r.get("game") == args.game and r.get("stopped_by_cpu_budget")
    }  # fmt: skip  (a run its step cap ended is run again)
    # seed by seed, the contenders alternating within a seed: a stopped comparison leaves whole seeds
    jobs = [(variant, seed) for seed, variant in itertools.product(args.seeds, args.variants)]
    for job in [j for j in jobs if j in done and not args.redo]:
        print(f"{' '.join(map(str, job))}: kept row, skipped (--redo runs it again)", flush=True)
    todo = [j for j in jobs if j not in done or args.redo]

    def line(row: dict) -> str:
        return (f"{row['variant']} {row['seed']}: score {row['score']:.1f}, {row['real_steps']:,} real steps in "
                f"{row['train_cpu_s']:.0f} CPU-s (cap {row['step_cap']:,}, "
                f"{'CPU budget' if row['stopped_by_cpu_budget'] else 'step cap'} ended it)")  # fmt: skip

    _harness.measure(todo, lambda job: run_one(*job, args, workdir), args.results, args.common, line)
    return [r for r in _report.read_rows(args.results) if r.get("cpu_budget_s") == args.cpu_budget_s]


def verdict_lines(by: dict, intervals: dict, game: str) -> list[str]:
    """The two questions the section answers, each with its figures."""
    short = game.split("/")[-1]
    lines = [f"Does the demo's recipe earn its place on {short}?"]
    pixel = intervals.get((game, "pixel"))
    for variant in ("stages", "real"):
        mine = intervals.get((game, variant))
        if not (pixel and mine):
            lines.append(f"- {DESCRIPTIONS[variant]} against pixel PPO: not measurable yet "
                         f"(intervals need {MIN_RUNS_FOR_INTERVAL} runs each)")  # fmt: skip
            continue
        said = ("above, intervals apart" if mine[1] > pixel[2] else "below, intervals apart" if mine[2] < pixel[1]
                else "the intervals overlap: no difference shown")  # fmt: skip
        lines.append(f"- {DESCRIPTIONS[variant]} against pixel PPO: IQM {mine[0]:.1f} against {pixel[0]:.1f}, {said}")
    lines += [f"- the curriculum against 100% real, {line}" for line in curriculum_lines(by, [game])]
    random = REFERENCES[game][0]
    beat = [f"{v} {sum(r['score'] > random for r in by[game, v])}/{len(by[game, v])}" for v in DESCRIPTIONS
            if (game, v) in by]  # fmt: skip
    lines.append(f"- runs scoring above the published random policy ({random}): {', '.join(beat)}")
    return lines


def render(rows: list[dict], results: Path) -> str:
    rows, capped = latest(rows)
    if not rows:
        return _report.no_rows(NAME)
    budget = rows[-1]["cpu_budget_s"]
    games = [g for g in REFERENCES if any(r["game"] == g for r in rows)]
    variants = [v for v in DESCRIPTIONS if any(r["variant"] == v for r in rows)]
    by = by_contender(rows)
    table, intervals = contender_table(by, games, variants, DESCRIPTIONS)
    # where each contender's learning rate would have finished annealing, and how far its run got
    caps = ", ".join(
        f"{v} {statistics.median(r['step_cap'] for r in by[g, v]):,.0f} "
        f"({statistics.median(r['real_steps'] / r['step_cap'] for r in by[g, v]):.2f} reached)"
        for g in games for v in variants if (g, v) in by
    )  # fmt: skip
    lines = [
        f"Training budget: **{budget:,.0f} CPU-seconds per run** (one torch thread, the process's every thread "
        "counted, set-up included, evaluation apart; the latent runs' encoder and world-model pretraining is "
        f"inside it). Score: mean of {statistics.median(r['eval_episodes'] for r in rows):.0f} full games (all "
        "lives, sticky actions 0.25, 108k-frame cap, no automatic FIRE, stochastic policy); IQM over runs (seeds) "
        "with a 95% stratified-bootstrap interval (2,000 replicates). Step caps, where each learning rate's "
        f"annealing would end (median share of it reached): {caps}. Curves: `docs/images/{FIGURE.name}` "
        "(training score against real frames and against CPU-seconds).",
        "",
        table,
        "",
        *threshold_lines(by, games, variants),
        "",
    ]
    for game in games:
        lines += [*verdict_lines(by, intervals, game), ""]
    curriculum = [r for r in rows if r["variant"] == "stages" and r.get("wm_real_events")]
    if curriculum:  # did its imagined steps have anything to teach? issue 31's diagnostic gate, per run
        lines += [
            "The curriculum runs' world models at the end of training (frugalrl.latent.quality, real rollouts of "
            "the run's policy; median (range) over runs): reward AUC "
            f"{_report.fmt_mmm([r['wm_reward_auc'] for r in curriculum], '{:.2f}')}, "
            "imagined / real reward events over 16 steps "
            + _report.fmt_mmm([r["wm_imagined_events"] / r["wm_real_events"] for r in curriculum], "{:.2f}")
            + "x (the gate: AUC >= 0.8, events within 25%).",
            "",
        ]
    lines += [*capped_lines(capped), *_report.rows_lines(rows + capped, results)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/RoadRunner-v5", choices=sorted(REFERENCES))
    parser.add_argument("--variants", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--cpu-budget-s", type=float, default=90.0)
    parser.add_argument("--eval-episodes", type=int, default=30)
    parser.add_argument("--workdir", help="where the runs go (default: a temporary folder)")
    parser.add_argument("--redo", action="store_true", help="run again what has a kept row at this budget")
    parser.add_argument("--steps-per-cpu-s", nargs="+", default=[], metavar="VARIANT=N",
                        help=f"a contender's step cap per CPU-second (default {STEPS_PER_CPU_S})")  # fmt: skip
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    args.steps_per_cpu_s = parse_rates(parser, args.steps_per_cpu_s, STEPS_PER_CPU_S)

    def render_and_plot(rows: list[dict], results: Path) -> str:
        if args.write:  # the figure the doc shows, from the same rows
            plot_curves(latest(rows)[0], FIGURE)
        return render(rows, results)

    _report.run_or_render(NAME, args, run, render_and_plot, select=lambda rows, _: rows,
                          after=["atari_equal_cpu"])  # fmt: skip


if __name__ == "__main__":
    main()
