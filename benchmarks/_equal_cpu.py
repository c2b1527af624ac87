"""Atari at equal training CPU-seconds: what ``atari_equal_cpu`` and ``demo_game_equal_cpu`` share.

Both train pixel PPO and latent contenders to the same CPU budget (one ``frugalrl train`` each, its
step cap only there so the learning rate anneals near the budget's end), keep a row per run, and
render IQM tables with stratified-bootstrap intervals from the runs the CPU budget ended. The run and
its row, the rows a table compares (``latest``), and the table's parts live here; ``rliable_check``
and the claims ledger read the same rows the same way.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from frugalrl.stats import bootstrap_iqm_difference, stratified_bootstrap_iqm

from . import _harness, _report
from ._atari import REFERENCES, human_normalised

PROTOCOL = "full-game"
# atari_equal_cpu's contenders (the frozen shared encoder, three games), in table order; the demo's have their own
DESCRIPTIONS = {
    "pixel": "pixel PPO (Nature CNN)",
    "real": "latent, frozen shared encoder, 100% real",
    "stages": "latent, seed's 3 stages",
    "adaptive": "latent, adaptive schedule",
}
# the world model's end-of-run diagnostics a row keeps (frugalrl.latent.quality)
WM_KEYS = ("wm_reward_auc", "wm_imagined_events", "wm_real_events", "wm_imagined_survival", "wm_real_survival")
CURVE_POINTS = 60
COLOURS = {"pixel": "tab:grey", "real": "tab:blue", "stages": "tab:orange", "adaptive": "tab:green"}
MIN_RUNS_FOR_INTERVAL = 3  # fewer runs give a bootstrap "interval" that says nothing about the spread


# --------------------------------------------------------------------------- a run and its row
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
    """The run's step budget (its learning-rate schedule's length): the CPU budget at the variant's rate
    (``args.steps_per_cpu_s``, as ``parse_rates`` fills it)."""
    return int(args.cpu_budget_s * args.steps_per_cpu_s[variant])


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


# --------------------------------------------------------------------------- the rows a table compares, its parts
def ci_text(point: float, low: float, high: float, fmt: str = "{:.2f}", runs: int = MIN_RUNS_FOR_INTERVAL) -> str:
    """``point [low, high]``; ``point [no interval: n runs]`` below ``MIN_RUNS_FOR_INTERVAL`` runs."""
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
                game.split("/")[-1], descriptions[variant], str(len(mine)), ci_text(*ci, runs=len(scores)),
                ci_text(*hn, runs=len(scores)),
                ", ".join(f"{s:.1f}" for s in scores),
                _report.fmt_mmm([r["real_steps"] for r in mine]),
                _report.fmt_mmm([r["train_cpu_s"] for r in mine]),
                _report.fmt_mmm([r["eval_cpu_s"] for r in mine]),
                f"{random} / {human}",
            ])  # fmt: skip
    header = ["game", "contender", "runs", "score IQM [95% CI]", "human-norm. IQM [95% CI]", "per-seed scores",
              "real steps", "training CPU-s", "evaluation CPU-s", "random / human"]  # fmt: skip
    return _report.markdown_table(header, table), intervals


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
                         f"{ci_text(*diff, fmt='{:+.2f}', runs=runs)}{says}")  # fmt: skip
    return lines


def plot_curves(rows: list[dict], path: Path) -> None:
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
