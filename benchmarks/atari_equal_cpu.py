"""Pixel PPO against the latent policy and the latent curriculum at equal training CPU-seconds on Atari.

The question a skeptical reader asks of the latent curriculum: for the same CPU a user pays, does the
cheap latent policy (frozen shared encoder, an MLP on 32 numbers) buy enough extra real experience to
score higher than pixel PPO, and do imagined rollouts add anything on top? Protocol:

- games fixed before running: Boxing, Breakout, Pong (``--games``);
- every run gets the same training budget in CPU-seconds of its process (``cpu_budget_s``, every
  thread, set-up included: loading the encoder and encoding the start latents count, evaluation does
  not), one torch thread; the step budget (``--steps-per-cpu-s`` times the budget, from
  ``benchmarks/atari_throughput.py``) is only there so the learning rate anneals about where the CPU
  budget ends, and a row says which of the two stopped it;
- contenders: ``pixel`` (PPO with the Nature CNN, CleanRL's settings, ``configs/atari100k-ppo.yaml``),
  ``real`` (the latent policy 100% real on the frozen shared encoder), ``stages`` (the seed's 3-stage
  curriculum on the encoder's world-model head), ``adaptive`` (the adaptive schedule, target the human score);
- scored as the field scores: 30 full games per run (all lives, sticky actions 0.25, the 108k-frame
  cap, no automatic FIRE), stochastic policy; aggregated as the interquartile mean with 95%
  stratified-bootstrap intervals over runs (seeds), raw and human-normalised (Kaiser et al. 2020's
  random and human references); compute-to-threshold: the CPU-seconds each run needed for its
  training score (mean of the last 10 real games) to reach pixel PPO's median final score.

The shared encoder (``--encoder``: ``runs/encoders/encoder``, made by
``python -m benchmarks.latent_vs_pixel --games ALE/Boxing-v5 ALE/Breakout-v5 ALE/Pong-v5 --encoder-only
--encoder-dir runs/encoders --write``) is listed once, with its cost amortised over the latent runs
that used it and unamortised. A build made again on another machine is another build (the table
lists the builds); the one made on 2026-12-05 (sha256 ``d8af3c2033aa...``, its pretraining row in
``latent_vs_pixel.jsonl``) is kept in ``benchmarks/artifacts/atari-shared-encoder``, so a later session
continues with it instead of making one: ``mkdir -p runs/encoders && cp -r
benchmarks/artifacts/atari-shared-encoder runs/encoders/encoder``. Rows are kept as each run ends
(``benchmarks/results/atari_equal_cpu.jsonl``); the table renders every row at the newest budget, so the
comparison runs in parts across sessions.

    python -m benchmarks.atari_equal_cpu --games ALE/Boxing-v5 --variants pixel real --seeds 1 2 \
        --cpu-budget-s 1200 --encoder runs/encoders/encoder --write
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path

from frugalrl.stats import interquartile_mean, stratified_bootstrap_iqm

from . import _harness, _report
from ._atari import REFERENCES, STAGES, human_normalised
from ._equal_cpu import (
    DESCRIPTIONS,
    MIN_RUNS_FOR_INTERVAL,
    PROTOCOL,
    by_contender,
    capped_lines,
    ci_text,
    contender_table,
    curriculum_lines,
    latest,
    parse_rates,
    plot_curves,
    step_cap,
    threshold_lines,
    train_row,
)

CONFIGS = {"pixel": "atari100k-ppo.yaml", "real": "atari100k-latent.yaml", "stages": "atari100k-latent.yaml",
           "adaptive": "atari100k-latent.yaml"}  # fmt: skip
OVERRIDES = {
    "pixel": ["device=cpu"],
    "real": ["latent.curriculum.stages=[{virtual_fraction: 0.0, real_share: 1.0}]"],
    "stages": [f"latent.curriculum.stages={STAGES}"],
    "adaptive": [f"latent.curriculum.stages={STAGES}", "latent.curriculum.mode=adaptive"],
}
# Real agent steps per training CPU-second, about 10% above what benchmarks/atari_throughput.py measured on
# this project's 2-core host (pixel 109, latent 514 steps per CPU-s), so the CPU budget, not the step
# budget, ends a run and the learning rate has annealed most of the way by then; the curriculum's
# imagined steps cost CPU too, so it gets fewer real steps.
STEPS_PER_CPU_S = {"pixel": 120, "real": 570, "stages": 500, "adaptive": 500}
CLEARLY_PLAYED = {"ALE/Boxing-v5": 20.0, "ALE/Breakout-v5": 10.0, "ALE/Pong-v5": -10.0}
FIGURE = _report.REPO_ROOT / "docs" / "images" / "atari_equal_cpu.png"


def run_one(game: str, variant: str, seed: int, args: argparse.Namespace, workdir: Path) -> dict:
    """One ``frugalrl train`` at the CPU budget; the figures of its row."""
    out = _harness.fresh_dir(workdir / f"{game.split('/')[-1]}-{variant}-{seed}")
    sets = [f"env.id={game}", f"seed={seed}", f"cpu_budget_s={args.cpu_budget_s}",
            f"{'ppo.total_timesteps' if variant == 'pixel' else 'total_real_steps'}"
            f"={step_cap(variant, args)}",
            f"eval.episodes={args.eval_episodes}", *OVERRIDES[variant]]  # fmt: skip
    if variant != "pixel":
        sets.append(f"latent.encoder_from={args.encoder}")
    if variant == "adaptive":
        sets.append(f"latent.curriculum.target_score={REFERENCES[game][1]}")
    return train_row(_report.REPO_ROOT / "configs" / CONFIGS[variant], out, sets, game, variant, seed, args)


def encoder_row(rows_path: Path, run: dict) -> dict | None:
    """The pretraining row (latent_vs_pixel.py) of the encoder a latent run used: the build with the run's
    fingerprint where both kept one, else the newest row for its directory made before the run."""
    if not run.get("encoder"):
        return None
    rows = [r for r in _report.read_rows(rows_path) if r.get("kind") == "encoder"]
    named = [r for r in rows if str(r.get("encoder_dir", "")).rstrip("/") == str(run["encoder"]).rstrip("/")]
    built = [r for r in named if run.get("encoder_sha256") and r.get("encoder_sha256") == run["encoder_sha256"]]
    earlier = [r for r in named if r.get("timestamp", "") <= run.get("timestamp", "")]
    return (built or earlier or [None])[-1]


def run(args: argparse.Namespace) -> list[dict]:
    # the encoder's fingerprint: one made again from the same recipe (a new machine) is another build
    sha = _report.file_sha256(Path(args.encoder) / "encoder.pt") if args.encoder else None
    args.common = _report.batch_common(protocol=PROTOCOL, encoder=args.encoder, encoder_sha256=sha,
                                       eval_episodes=args.eval_episodes)  # fmt: skip
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="atari-equal-cpu-"))
    workdir.mkdir(parents=True, exist_ok=True)
    done = {
        (r["game"], r["variant"], r["seed"])
        for r in _report.read_rows(args.results)
        if r.get("cpu_budget_s") == args.cpu_budget_s
        and r.get("protocol") == PROTOCOL
        and r.get("stopped_by_cpu_budget")
    }  # fmt: skip  (a run its step cap ended is run again)
    # Seed by seed, the variants alternating within a seed (A B A B): a stopped comparison leaves whole pairs.
    # With --workers 2 the two contenders of a pair run at once, one per core, and share the machine alike.
    order = _harness.interleave(args.seeds, list(itertools.product(args.games, args.variants)))
    jobs = [(game, variant, seed) for seed, (game, variant) in order]
    for job in [j for j in jobs if j in done and not args.redo]:
        print(f"{' '.join(map(str, job))}: kept row, skipped (--redo runs it again)", flush=True)
    todo = [j for j in jobs if j not in done or args.redo]

    def line(row: dict) -> str:
        return (f"{row['game']} {row['variant']} {row['seed']}: score {row['score']:.2f}, {row['real_steps']:,} real "
                f"steps in {row['train_cpu_s']:.0f} CPU-s")  # fmt: skip

    _harness.measure(todo, lambda job: run_one(*job, args, workdir), args.results, args.common, line, args.workers)
    return [r for r in _report.read_rows(args.results) if r.get("cpu_budget_s") == args.cpu_budget_s]


def render(rows: list[dict], results: Path) -> str:
    rows, capped = latest(rows)
    if not rows:
        return _report.no_rows("atari_equal_cpu")
    budget = rows[-1]["cpu_budget_s"]
    games = [g for g in REFERENCES if any(r["game"] == g for r in rows)]
    variants = [v for v in CONFIGS if any(r["variant"] == v for r in rows)]
    lines = [
        f"Training budget: **{budget:,.0f} CPU-seconds per run** ({budget / 60:.0f} CPU-minutes, one torch thread, "
        f"the process's every thread counted, set-up included, evaluation apart). Score: mean of "
        f"{statistics.median(r['eval_episodes'] for r in rows):.0f} full games "
        "(all lives, sticky actions 0.25, 108k-frame cap, no automatic FIRE, stochastic policy); IQM over runs "
        "(seeds) with a 95% stratified-bootstrap interval (2,000 replicates); human-normalised with the random "
        "and human references of Kaiser et al. 2020. Curves: `docs/images/atari_equal_cpu.png` (training score "
        "against real frames and against CPU-seconds, one line per run).",
        "",
    ]
    by = by_contender(rows)
    table, intervals = contender_table(by, games, variants)
    lines.append(table)
    lines += ["", *aggregate_lines(by, games, variants), *threshold_lines(by, games, variants)]
    lines += ["", *target_lines(by, intervals, games), "", *capped_lines(capped), *encoder_lines(rows),
              *_report.rows_lines(rows + capped, results)]  # fmt: skip
    return "\n".join(lines)


def aggregate_lines(by: dict, games: list[str], variants: list[str]) -> list[str]:
    lines = []
    for variant in variants:
        per_game = {g: [human_normalised(g, r["score"]) for r in by.get((g, variant), [])] for g in games}
        if all(per_game.values()) and len(games) > 1:
            ci = stratified_bootstrap_iqm(per_game)
            lines.append(
                f"- {DESCRIPTIONS[variant]}: human-normalised IQM over {len(games)} games {ci_text(*ci, '{:.3f}')}"
            )
    return (["Across games (stratified over games):", *lines, ""]) if lines else []


def target_lines(by: dict, intervals: dict, games: list[str]) -> list[str]:
    lines = ["Targets (issue 31):"]
    above = []
    for game in games:
        pixel = intervals.get((game, "pixel"))
        for variant in ("real", "stages", "adaptive"):
            mine = intervals.get((game, variant))
            if pixel and mine and mine[1] > pixel[2]:
                above.append(f"{game.split('/')[-1]} ({variant})")
    verdict = "met" if len({a.split(" ")[0] for a in above}) >= 2 else "missed"
    if not intervals:
        verdict = f"not measurable yet (intervals need {MIN_RUNS_FOR_INTERVAL} runs per contender)"
    lines.append(f"- a latent contender above pixel PPO with non-overlapping intervals on at least 2 of 3 games: "
                 f"{verdict} ({', '.join(above) or 'none'}; {len(games)} of 3 games measured)")  # fmt: skip
    iqms = {key: interquartile_mean([r["score"] for r in rows]) for key, rows in by.items()}
    played = [f"{g.split('/')[-1]} {v} {value:.1f} ({len(by[g, v])} runs)" for (g, v), value in iqms.items()
              if g in CLEARLY_PLAYED and v != "pixel" and value > CLEARLY_PLAYED[g]]  # fmt: skip
    lines.append("- a game clearly played by a latent contender (Boxing > 20, Breakout > 10, Pong > -10): "
                 f"{'met: ' + ', '.join(played) if played else 'missed'}")  # fmt: skip
    lines += [f"- the curriculum against 100% real latent, {line}" for line in curriculum_lines(by, games)]
    return lines


def encoder_lines(rows: list[dict]) -> list[str]:
    encoder = rows[-1].get("encoder")
    latent_runs = [r for r in rows if r["variant"] != "pixel"]
    if not latent_runs:
        return []
    kept = encoder_row(_report.RESULTS_DIR / "latent_vs_pixel.jsonl", latent_runs[-1])
    if kept is None:
        return [f"Shared encoder `{encoder}`: no pretraining row kept, so its cost is not listed.", ""]
    # CPU-s where the pretraining's process was measured; else its wall-clock (one torch thread: about the same)
    cost, unit = (kept["cpu_s"], "CPU-s") if kept.get("cpu_s") else (kept["wall_s"], "s of wall-clock (one thread)")
    lines = [
        f"Shared encoder `{encoder}` ({', '.join(kept['games'])}, {kept['dataset_frames']:,} random-play frames, "
        f"PSNR {kept['psnr_db']} dB): made once, {cost:,.0f} {unit} and {kept['pretrain_flops'] / 1e12:.1f} TFLOPs "
        f"unamortised; over the {len(latent_runs)} latent runs here, {cost / len(latent_runs):,.0f} {unit} each "
        "(not inside their training budget).",
    ]
    builds: dict[str, list[str]] = {}
    for r in latent_runs:
        build = (r.get("encoder_sha256") or "not recorded")[:12]
        builds.setdefault(build, []).append(f"{r['game'].split('/')[-1]} {r['variant']} seed {r['seed']}")
    if len(builds) > 1:  # the same recipe and frames, made again on another machine: not the same weights
        lines.append(
            f"The latent runs used {len(builds)} builds of this encoder (same recipe and frames, made again on "
            "another machine; `not recorded`: before fingerprints were kept): "
            + "; ".join(f"{build}: {', '.join(runs)}" for build, runs in builds.items())
            + "."
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["ALE/Boxing-v5", "ALE/Breakout-v5", "ALE/Pong-v5"])
    parser.add_argument("--variants", nargs="+", default=["pixel", "real"], choices=list(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--cpu-budget-s", type=float, default=1200.0)
    parser.add_argument("--eval-episodes", type=int, default=30)
    parser.add_argument("--encoder", help="the shared encoder directory (latent variants)")
    parser.add_argument("--workdir", help="where the runs go (default: a temporary folder)")
    parser.add_argument("--workers", type=int, default=1, help="runs at a time (CPU-seconds are each run's own)")
    parser.add_argument("--redo", action="store_true", help="run again what has a kept row at this budget")
    parser.add_argument(
        "--steps-per-cpu-s", nargs="+", default=[], metavar="VARIANT=N",
        help="a variant's step cap per CPU-second, for a host faster than STEPS_PER_CPU_S assumes (a run its "
        "cap ends before the budget is not compared)",
    )  # fmt: skip
    _report.add_output_args(parser, "atari_equal_cpu")
    args = parser.parse_args()
    if args.encoder and not args.report_only:  # a relative path means the caller's; it must exist before hours of runs
        if not (Path(args.encoder) / "encoder.pt").is_file():
            parser.error(
                f"--encoder {args.encoder}: no encoder.pt there; make it with "
                "python -m benchmarks.latent_vs_pixel --encoder-only"
            )
        args.encoder = str(Path(args.encoder).resolve())  # rows name it repo-relative (_report.portable)
    if any(v != "pixel" for v in args.variants) and not args.encoder and not args.report_only:
        parser.error(
            "latent variants need --encoder (make it with python -m benchmarks.latent_vs_pixel --encoder-only)"
        )
    args.steps_per_cpu_s = parse_rates(parser, args.steps_per_cpu_s, STEPS_PER_CPU_S)

    def render_and_plot(rows: list[dict], results: Path) -> str:
        if args.write:  # the figure the doc shows, from the same rows
            plot_curves(latest(rows)[0], FIGURE)
        return render(rows, results)

    _report.run_or_render("atari_equal_cpu", args, run, render_and_plot, select=lambda rows, _: rows)


if __name__ == "__main__":
    main()
