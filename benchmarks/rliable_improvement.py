"""The races' probability of improvement, computed by rliable itself beside ``frugalrl.stats``.

``frugalrl race`` reports, per contender, the probability that one of its runs scores above one of the
control's (ties half) with a stratified-bootstrap interval (``frugalrl.stats.probability_of_improvement``).
rliable cannot be installed beside this project's pins (see ``rliable_check``), so this script runs rliable's
``metrics.probability_of_improvement`` through ``get_interval_estimates`` in its own venv (``make
rliable-venv``, ``benchmarks/_rliable_side.py``) on the kept races' rows (``benchmarks/results/races/``):
every contender against its race's control. Both sides draw 2,000 replicates from their own generators: the
points must agree exactly (``tests/test_race.py`` recomputes frugalrl's from the kept scores), an interval
end may differ where few runs give few distinct values.

    make rliable-venv
    python -m benchmarks.rliable_improvement --write
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from frugalrl.stats import probability_of_improvement

from . import _report
from ._rliable import add_python_arg, ask

NAME = "rliable_improvement"
REPS = 2000
SEED = 0


def pairs() -> dict[str, tuple[list[float], list[float]]]:
    """``race/contender`` -> (the contender's scores, the control's), by seed, from every kept race."""
    found = {}
    for race_dir in sorted(p for p in _report.RACES_DIR.iterdir() if (p / "rows.jsonl").is_file()):
        race = json.loads((race_dir / "race.json").read_text())
        rows = [json.loads(line) for line in (race_dir / "rows.jsonl").read_text().splitlines() if line.strip()]
        names = [c["name"] for c in race["contenders"]]
        scores = {n: [r["score"] for r in sorted(rows, key=lambda r: r["seed"]) if r["contender"] == n] for n in names}
        for name in names[1:]:
            found[f"{race_dir.name}/{name}"] = (scores[name], scores[names[0]])
    return found


def run(args: argparse.Namespace) -> list[dict]:
    found = pairs()
    pairs_in = {n: [[[s] for s in x], [[s] for s in y]] for n, (x, y) in found.items()}
    answer = ask(args.rliable_python, {"reps": REPS, "seed": SEED, "pairs": pairs_in})
    common = _report.batch_common(rliable=answer["rliable"], reps=REPS, load_before=_report.load_average())
    rows = []
    for name, (x, y) in found.items():
        ours = probability_of_improvement(x, y, reps=REPS, seed=SEED)
        row = _report.stamp(
            common, pair=name, x=x, y=y, frugalrl=list(ours), rliable_estimate=answer["improvement"][name]
        )
        _report.append_row(args.results, row)
        rows.append(row)
    return rows


def render(rows: list[dict], results: Path) -> str:
    def est(t: list[float]) -> str:
        return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"

    table = [[r["pair"], f"{len(r['x'])} / {len(r['y'])}", est(r["frugalrl"]), est(r["rliable_estimate"])]
             for r in rows]  # fmt: skip
    point_gap = max(abs(r["frugalrl"][0] - r["rliable_estimate"][0]) for r in rows)
    end_gap = max(max(abs(r["frugalrl"][i] - r["rliable_estimate"][i]) for i in (1, 2)) for r in rows)
    first = rows[0]
    lines = [
        f"Each kept race's contenders against its control (`benchmarks/results/races/`): the probability that a run "
        f"of the contender scores above a run of the control (ties half), by `frugalrl.stats.probability_of_"
        f"improvement` and by rliable {first['rliable']} (`metrics.probability_of_improvement` through "
        f"`get_interval_estimates`), {first['reps']:,} stratified-bootstrap replicates a side from each side's own "
        "generator.",
        "",
        _report.markdown_table(
            ["race/contender", "runs (contender / control)", "frugalrl P(X > Y) [95% CI]", "rliable P(X > Y) [95% CI]"],
            table,
        ),  # fmt: skip
        "",
        f"Points: largest difference {point_gap:.2g}. Interval ends: largest difference {end_gap:.3f} (each side "
        "resamples apart).",
        "",
        *_report.rows_lines(rows, results),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_python_arg(parser)
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, after=["rliable_check"])


if __name__ == "__main__":
    main()
