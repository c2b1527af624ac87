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
``python benchmarks/latent_vs_pixel.py --games ALE/Boxing-v5 ALE/Breakout-v5 ALE/Pong-v5 --encoder-only
--encoder-dir runs/encoders --write``) is listed once, with its cost amortised over the latent runs
that used it and unamortised. A build made again on another machine is another build (the table
lists the builds); the one made on 2026-12-05 (sha256 ``d8af3c2033aa...``, its pretraining row in
``latent_vs_pixel.jsonl``) is kept in ``benchmarks/artifacts/atari-shared-encoder``, so a later session
continues with it instead of making one: ``mkdir -p runs/encoders && cp -r
benchmarks/artifacts/atari-shared-encoder runs/encoders/encoder``. Rows are kept as each run ends
(``benchmarks/results/atari_equal_cpu.jsonl``); the table renders every row at the newest budget, so the
comparison runs in parts across sessions.

    python benchmarks/atari_equal_cpu.py --games ALE/Boxing-v5 --variants pixel real --seeds 1 2 \
        --cpu-budget-s 1200 --encoder runs/encoders/encoder --write
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path

import _harness
import _report
from frugalrl.stats import bootstrap_iqm_difference, interquartile_mean, stratified_bootstrap_iqm
from latent_vs_pixel import REFERENCES, STAGES, human_normalised

PROTOCOL = "full-game"
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
DESCRIPTIONS = {
    "pixel": "pixel PPO (Nature CNN)",
    "real": "latent, frozen shared encoder, 100% real",
    "stages": "latent, seed's 3 stages",
    "adaptive": "latent, adaptive schedule",
}
# the world model's end-of-run diagnostics a row keeps (frugalrl.latent.quality)
WM_KEYS = ("wm_reward_auc", "wm_imagined_events", "wm_real_events", "wm_imagined_survival", "wm_real_survival")
CLEARLY_PLAYED = {"ALE/Boxing-v5": 20.0, "ALE/Breakout-v5": 10.0, "ALE/Pong-v5": -10.0}
CURVE_POINTS = 60
FIGURE = _report.REPO_ROOT / "docs" / "images" / "atari_equal_cpu.png"
COLOURS = {"pixel": "tab:grey", "real": "tab:blue", "stages": "tab:orange", "adaptive": "tab:green"}


def curve(run_dir: Path) -> list[list[float]]:
    """[real agent step, process CPU-s, mean of the last 10 real training games] after each update that
    ended a real game, thinned to at most ``CURVE_POINTS`` points."""
    points, recent = [], []
    for row in _harness.metrics(run_dir):
        if row.get("source") == "virtual" or row.get("episode_return") is None:
            continue
        recent = [*recent, row["episode_return"]][-10:]
        step = row.get("real_step", row.get("step"))
        points.append([int(step), float(row["cpu_s"]), round(statistics.mean(recent), 3)])
    stride = max(1, len(points) // CURVE_POINTS)
    return points[::stride] + ([points[-1]] if points and (len(points) - 1) % stride else [])


def step_cap(variant: str, args: argparse.Namespace) -> int:
    """The run's step budget (its learning-rate schedule's length): the CPU budget at the variant's rate."""
    rate = {**STEPS_PER_CPU_S, **getattr(args, "steps_per_cpu_s", {})}[variant]
    return int(args.cpu_budget_s * rate)


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


def train_row(config: Path, out: Path, sets: list[str], game: str, variant: str, seed: int,
              args: argparse.Namespace) -> dict:  # fmt: skip
    """``frugalrl train CONFIG --out OUT --set SETS`` and the row of that run (score, steps, CPU, curve)."""
    run = _harness.train(config, out, sets)
    summary, process_cpu_s = run.summary, run.cpu_s
    points = curve(out)
    return {
        "protocol": summary.get("eval_protocol", "?"),
        "cpu_budget_s": args.cpu_budget_s,
        "game": game,
        "variant": variant,
        "seed": seed,
        "score": summary["eval_mean"],
        "eval_returns": summary["eval_returns"],
        "real_steps": summary["real_env_steps"],
        "virtual_steps": summary.get("virtual_env_steps", 0),
        "train_cpu_s": points[-1][1] if points else summary["cpu_s"],
        "cpu_s_before_eval": summary["cpu_s"],
        "eval_cpu_s": summary["eval_cpu_s"],
        "process_cpu_s": round(process_cpu_s, 1),
        "stopped_by_cpu_budget": summary.get("stopped_by_cpu_budget"),
        "step_cap": step_cap(variant, args),
        "per_run_flops": summary.get("per_run_flops", summary.get("total_flops")),
        "curve": points,
        **{k: summary[k] for k in WM_KEYS if k in summary},
    }


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


def plot_curves(rows: list[dict], path: Path = FIGURE) -> None:
    """Training score (mean of the last 10 real games) against real frames and against CPU-seconds, one line
    per run, a row of two panels per game (``--write`` refreshes the figure the doc shows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = [g for g in REFERENCES if any(r["game"] == g for r in rows)]
    fig, axes = plt.subplots(len(games), 2, figsize=(10, 3.2 * len(games)), squeeze=False)
    for (frames_ax, cpu_ax), game in zip(axes, games, strict=True):
        for row in (r for r in rows if r["game"] == game and r["curve"]):
            steps, cpu, score = zip(*row["curve"], strict=True)
            label = f"{row['variant']} seed {row['seed']}"
            frames_ax.plot([4 * s for s in steps], score, color=COLOURS[row["variant"]], label=label, lw=1)
            cpu_ax.plot(cpu, score, color=COLOURS[row["variant"]], lw=1)
        for ax, xlabel in ((frames_ax, "real frames"), (cpu_ax, "process CPU-seconds")):
            ax.axhline(REFERENCES[game][0], color="black", ls=":", lw=0.8)  # the published random score
            ax.set(title=game.split("/")[-1], xlabel=xlabel, ylabel="training score (last 10 games)")
        frames_ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


MIN_RUNS_FOR_INTERVAL = 3  # fewer runs give a bootstrap "interval" that says nothing about the spread


def _ci(point: float, low: float, high: float, fmt: str = "{:.2f}", runs: int = MIN_RUNS_FOR_INTERVAL) -> str:
    if runs < MIN_RUNS_FOR_INTERVAL:
        return f"{fmt.format(point)} [no interval: {runs} run{'s' if runs > 1 else ''}]"
    return f"{fmt.format(point)} [{fmt.format(low)}, {fmt.format(high)}]"


def latest(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The full-game rows at the newest budget, the newest row of every (game, variant, seed); and apart,
    the runs whose step cap ended them before the CPU budget did (not equal-CPU runs: not compared)."""
    rows = [r for r in rows if r.get("protocol") == PROTOCOL]
    if not rows:
        return [], []
    budget = rows[-1]["cpu_budget_s"]
    at_budget = [r for r in rows if r["cpu_budget_s"] == budget]
    newest = {(r["game"], r["variant"], r["seed"]): r for r in at_budget if r.get("stopped_by_cpu_budget")}
    capped = [r for r in at_budget if not r.get("stopped_by_cpu_budget")]
    return list(newest.values()), capped


def capped_lines(capped: list[dict]) -> list[str]:
    if not capped:
        return []
    runs = "; ".join(f"{r['game'].split('/')[-1]} {r['variant']} seed {r['seed']}: {r['real_steps']:,} steps "
                     f"in {r['train_cpu_s']:,.0f} CPU-s, score {r['score']:.2f}" for r in capped)  # fmt: skip
    return [f"Not compared: {len(capped)} run(s) ended at their step cap before the CPU budget (a host faster "
            f"than the caps assumed; the caps were raised with --steps-per-cpu-s and the seeds run again): "
            f"{runs}.", ""]  # fmt: skip


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


def contender_table(
    by: dict, games: list[str], variants: list[str], descriptions: dict[str, str] = DESCRIPTIONS
) -> tuple[str, dict]:
    """The table, a line per game and contender (IQM with its interval, raw and human-normalised, the per-seed
    scores, steps and CPU), and the intervals of the contenders with enough runs for one."""
    table = []
    intervals: dict[tuple[str, str], tuple[float, float, float]] = {}
    for game in games:
        random, human = REFERENCES[game]
        for variant in variants:
            mine = sorted(by.get((game, variant), []), key=lambda r: r["seed"])
            if not mine:
                continue
            scores = [r["score"] for r in mine]
            ci = stratified_bootstrap_iqm({game: scores})
            if len(scores) >= MIN_RUNS_FOR_INTERVAL:  # only real intervals enter the comparisons below
                intervals[game, variant] = ci
            hn = stratified_bootstrap_iqm({game: [human_normalised(game, s) for s in scores]})
            table.append([
                game.split("/")[-1], descriptions[variant], str(len(mine)), _ci(*ci, runs=len(scores)),
                _ci(*hn, runs=len(scores)),
                ", ".join(f"{s:.1f}" for s in scores),
                _report.fmt_mmm([r["real_steps"] for r in mine]),
                _report.fmt_mmm([r["train_cpu_s"] for r in mine]),
                _report.fmt_mmm([r["eval_cpu_s"] for r in mine]),
                f"{random} / {human}",
            ])  # fmt: skip
    header = ["game", "contender", "runs", "score IQM [95% CI]", "human-norm. IQM [95% CI]", "per-seed scores",
              "real steps", "training CPU-s", "evaluation CPU-s", "random / human"]  # fmt: skip
    return _report.markdown_table(header, table), intervals


def aggregate_lines(by: dict, games: list[str], variants: list[str]) -> list[str]:
    lines = []
    for variant in variants:
        per_game = {g: [human_normalised(g, r["score"]) for r in by.get((g, variant), [])] for g in games}
        if all(per_game.values()) and len(games) > 1:
            ci = stratified_bootstrap_iqm(per_game)
            lines.append(
                f"- {DESCRIPTIONS[variant]}: human-normalised IQM over {len(games)} games {_ci(*ci, '{:.3f}')}"
            )
    return (["Across games (stratified over games):", *lines, ""]) if lines else []


def threshold_lines(by: dict, games: list[str], variants: list[str]) -> list[str]:
    """CPU-seconds each run needed for its training score to reach pixel PPO's median final score."""
    lines = []
    for game in games:
        pixel = [r["score"] for r in by.get((game, "pixel"), [])]
        if not pixel:
            continue
        threshold = statistics.median(pixel)
        cells = []
        for variant in variants:
            mine = by.get((game, variant), [])
            if not mine:  # a contender not run on this game (yet) has nothing to say here
                continue
            reached = [next((p[1] for p in r["curve"] if p[2] >= threshold), None) for r in mine]
            hit = [c for c in reached if c is not None]
            median = f"median {statistics.median(hit):,.0f} CPU-s" if hit else "never"
            cells.append(f"{variant} {len(hit)}/{len(mine)} runs, {median}")
        lines.append(f"- {game.split('/')[-1]}, threshold {threshold:.2f} (pixel PPO's median final score): "
                     + "; ".join(cells))  # fmt: skip
    head = "Compute to threshold (training score, mean of the last 10 real games, first reaching the threshold):"
    return [head, *lines] if lines else []


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


def by_contender(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(game, variant) -> its rows."""
    by: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        by.setdefault((row["game"], row["variant"]), []).append(row)
    return by


def curriculum_lines(by: dict, games: list[str]) -> list[str]:
    """Issue 31: the curriculum against 100% real latent at equal CPU-seconds, the difference of their IQMs with
    its bootstrap interval (each contender's runs resampled apart), whatever its sign: one clause per game."""
    lines = []
    for game in games:
        for variant in ("stages", "adaptive"):
            cur, real = ([r["score"] for r in by.get((game, v), [])] for v in (variant, "real"))
            if not (cur and real):
                continue
            diff = bootstrap_iqm_difference(cur, real)
            runs = min(len(cur), len(real))
            says = ""
            if runs >= MIN_RUNS_FOR_INTERVAL:
                says = (" (the curriculum ahead)" if diff[1] > 0 else " (the curriculum behind)" if diff[2] < 0
                        else " (the interval holds 0: no difference shown)")  # fmt: skip
            lines.append(f"{game.split('/')[-1]} {variant} minus real "
                         f"({len(cur)} against {len(real)} runs): IQM difference "
                         f"{_ci(*diff, fmt='{:+.2f}', runs=runs)}{says}")  # fmt: skip
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


def parse_rates(parser: argparse.ArgumentParser, pairs: list[str], defaults: dict[str, float]) -> dict[str, float]:
    """``--steps-per-cpu-s VARIANT=N ...`` over ``defaults``; a malformed pair or an unknown variant is refused in
    one line (exit 2)."""
    try:
        given = {k: float(v) for k, v in (item.split("=", 1) for item in pairs)}
    except ValueError:
        parser.error("--steps-per-cpu-s takes VARIANT=N pairs, e.g. pixel=260 real=1370")
    if set(given) - set(defaults):
        parser.error(f"--steps-per-cpu-s: variants are {sorted(defaults)}")
    return {**defaults, **given}


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
                f"--encoder {args.encoder}: no encoder.pt there; make it with latent_vs_pixel.py --encoder-only"
            )
        args.encoder = str(Path(args.encoder).resolve())  # rows name it repo-relative (_report.portable)
    if any(v != "pixel" for v in args.variants) and not args.encoder and not args.report_only:
        parser.error("latent variants need --encoder (make it with latent_vs_pixel.py --encoder-only)")
    args.steps_per_cpu_s = parse_rates(parser, args.steps_per_cpu_s, STEPS_PER_CPU_S)

    def render_and_plot(rows: list[dict], results: Path) -> str:
        if args.write:  # the figure the doc shows, from the same rows
            plot_curves(latest(rows)[0])
        return render(rows, results)

    _report.run_or_render("atari_equal_cpu", args, run, render_and_plot, select=lambda rows, _: rows)


if __name__ == "__main__":
    main()
