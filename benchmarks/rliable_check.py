"""The equal-CPU table's IQM intervals, computed again by rliable itself, beside frugalrl's own.

Issue 31 asks for rliable (Agarwal et al. 2021), the field's library for aggregate RL statistics. It
cannot be installed beside this project's pins (rliable 1.2.0 needs ``arch<8``; arch 7 does not import
under pandas 3; arch 8 rejects the ``random_state`` keyword rliable passes), so the tables use
``frugalrl.stats.stratified_bootstrap_iqm``, which does what rliable's ``get_interval_estimates`` does with
``aggregate_iqm``. This script checks that claim on the kept rows: every (game, contender) of
``benchmarks/results/atari_equal_cpu.jsonl`` with at least 3 runs (the runs the table compares), and
across games, human-normalised, for each contender with runs on every game (its first n seeds on each
game, n the fewest it has on any: rliable takes a runs x games matrix). rliable runs in its own venv
(``make rliable-venv``: rliable 1.2.0, arch 7, pandas 2) through ``benchmarks/_rliable_side.py``; both
sides draw 2,000 replicates from their own generators, so the points must agree exactly, and an interval
end may differ where the resampled IQMs of a few runs take few distinct values.

    make rliable-venv
    python -m benchmarks.rliable_check --write
"""

from __future__ import annotations

import argparse
from pathlib import Path

from frugalrl.stats import stratified_bootstrap_iqm

from . import _report
from ._atari import REFERENCES, human_normalised
from ._equal_cpu import DESCRIPTIONS, MIN_RUNS_FOR_INTERVAL, by_contender, latest
from ._rliable import add_python_arg, ask

NAME = "rliable_check"
REPS = 2000
SEED = 0
ALL_GAMES = "all games, human-normalised"


def matrices(rows: list[dict]) -> dict[tuple[str, str], list[list[float]]]:
    """(scope, variant) -> runs x tasks scores: each game alone (one column), and every game together,
    human-normalised, for a contender with ``MIN_RUNS_FOR_INTERVAL`` runs or more on every game."""
    by = by_contender(rows)
    games = [g for g in REFERENCES if any(r["game"] == g for r in rows)]
    out: dict[tuple[str, str], list[list[float]]] = {}
    for variant in DESCRIPTIONS:
        columns = {}
        for game in games:
            scores = [r["score"] for r in sorted(by.get((game, variant), []), key=lambda r: r["seed"])]
            if len(scores) >= MIN_RUNS_FOR_INTERVAL:
                out[game, variant] = [[s] for s in scores]
                columns[game] = [human_normalised(game, s) for s in scores]
        if len(games) > 1 and len(columns) == len(games):
            n = min(len(c) for c in columns.values())
            out[ALL_GAMES, variant] = [[columns[g][i] for g in games] for i in range(n)]
    return out


def rliable_estimates(python: Path, scores: dict[str, list[list[float]]]) -> tuple[str, dict[str, list[float]]]:
    """rliable's (version, {name: [iqm, low, high]}), from ``python`` (a venv with rliable) running the side file."""
    answer = ask(python, {"reps": REPS, "seed": SEED, "scores": scores})
    return answer["rliable"], answer["estimates"]


def run(args: argparse.Namespace) -> list[dict]:
    compared, _capped = latest(_report.read_rows(args.equal_cpu_results))
    found = matrices(compared)
    if not found:
        raise SystemExit(f"{args.equal_cpu_results}: no contender has {MIN_RUNS_FOR_INTERVAL} runs yet")
    names = {f"{scope}|{variant}": (scope, variant) for scope, variant in found}
    version, theirs = rliable_estimates(args.rliable_python, {name: found[key] for name, key in names.items()})
    common = _report.batch_common(rliable=version, reps=REPS, load_before=_report.load_average())
    rows = []
    for name, (scope, variant) in names.items():
        matrix = found[scope, variant]
        tasks = {str(t): [run_scores[t] for run_scores in matrix] for t in range(len(matrix[0]))}
        ours = stratified_bootstrap_iqm(tasks, reps=REPS, seed=SEED)
        row = _report.stamp(common, scope=scope, variant=variant, runs=len(matrix), scores=matrix,
                            frugalrl=list(ours), rliable_estimate=theirs[name])  # fmt: skip
        _report.append_row(args.results, row)
        rows.append(row)
    return rows


def _estimate(point_low_high: list[float]) -> str:
    point, low, high = point_low_high
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def render(rows: list[dict], results: Path) -> str:
    table, point_gaps, end_gaps = [], [], []
    for r in rows:
        ours, theirs = r["frugalrl"], r["rliable_estimate"]
        point_gaps.append(abs(ours[0] - theirs[0]))
        end_gaps.append(max(abs(ours[1] - theirs[1]), abs(ours[2] - theirs[2])))
        scope = r["scope"] if r["scope"] == ALL_GAMES else r["scope"].split("/")[-1]
        table.append([scope, DESCRIPTIONS[r["variant"]], str(r["runs"]), _estimate(ours),
                      _estimate(theirs), f"{end_gaps[-1]:.3f}"])  # fmt: skip
    first = rows[0]
    lines = [
        f"The equal-CPU table's intervals (`benchmarks/results/atari_equal_cpu.jsonl`, the rows it compares), "
        f"each computed by `frugalrl.stats.stratified_bootstrap_iqm` and by rliable {first['rliable']} "
        f"(`get_interval_estimates` with `aggregate_iqm`, percentile intervals), {first['reps']:,} replicates a side "
        "from each side's own generator. Across games: the contender's first n seeds on every game, n the fewest it "
        "has on any, human-normalised (rliable takes a runs x games matrix), both sides on that matrix; the equal-CPU "
        "table's own aggregate resamples every run of each game, so its figure can differ from these rows'.",
        "",
        _report.markdown_table(
            [
                "scope",
                "contender",
                "runs",
                "frugalrl IQM [95% CI]",
                "rliable IQM [95% CI]",
                "largest gap at an interval end",
            ],
            table,
        ),
        "",
        f"Points: largest difference {max(point_gaps):.2g} (the same 25%-trimmed mean). Interval ends: the same on "
        f"{sum(g < 1e-9 for g in end_gaps)} of {len(end_gaps)} rows, largest difference {max(end_gaps):.3f}: each side "
        f"draws its {first['reps']:,} replicates apart, and the IQMs of 3-5 resampled runs take few distinct values, "
        "so a 2.5% or 97.5% point can land on a neighbouring one.",
        "",
        *_report.rows_lines(rows, results),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_python_arg(parser)
    parser.add_argument("--equal-cpu-results", type=Path,
                        default=_report.RESULTS_DIR / "atari_equal_cpu.jsonl")  # fmt: skip
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, after=["atari_equal_cpu"])


if __name__ == "__main__":
    main()
