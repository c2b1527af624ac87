"""A race's result as the user reads it: what ran, the table, the decision (``table.md``, ``decision.json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frugalrl.race.verdict import BETTER, LEVEL, MIN_SEEDS, TOO_FEW, Verdict

TABLE_FILE = "table.md"
DECISION_FILE = "decision.json"
PLOT_FILE = "race.png"


def _ci(triple: tuple[float, float, float] | None, fmt: str = "{:.2f}") -> str:
    if triple is None:
        return "n/a"
    point, low, high = triple
    return f"{fmt.format(point)} [{fmt.format(low)}, {fmt.format(high)}]"


def machine_text(race: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The machine the runs ran on (each row names its own; older rows only the race's), or a warning."""
    kinds = sorted({(r["machine"]["cpu"], r["machine"]["cpus"]) for r in rows if r.get("machine")})
    if not kinds and race.get("machine"):
        kinds = [(race["machine"]["cpu"], race["machine"]["cpus"])]
    named = "; ".join(f"{cpu}, {cpus} CPUs" for cpu, cpus in kinds) or "not recorded"
    if len(kinds) > 1:
        return f"Machines: {named}: the runs ran on more than one kind of machine, so their CPU-seconds do not compare."
    return f"Machine: {named} (CPU-seconds compare only on one kind of machine)."


def render(
    race: dict[str, Any], verdicts: Sequence[Verdict], winner: str, bar: float | None, rows: Sequence[dict[str, Any]]
) -> str:
    """The markdown the command prints and keeps in ``table.md``."""
    control = race["contenders"][0]["name"]
    described = {c["name"]: c for c in race["contenders"]}
    seeds = race["seeds"]
    lines = [
        f"Race on `{race['config']}`" + (f" with --set {' '.join(race['sets'])}" if race["sets"] else "") + ": "
        f"{race['cpu_budget_s']:g} CPU-seconds per run (training, set-up included, evaluation apart; one torch "
        f"thread), seeds {', '.join(map(str, seeds))} paired across contenders; control: {control}. "
        + machine_text(race, rows),
        "",
        "| contender | runs | final score, IQM [95% CI] | P(run beats a control run) [95% CI] | "
        f"paired difference from {control}, mean [95% CI] | training CPU-s, median | env steps, median | "
        "CPU-s to the threshold, median (runs reaching it) | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in verdicts:
        steps = f"{v.env_steps:,.0f}" if v.env_steps is not None else "n/a"
        reach = f"{v.cpu_to_threshold:.1f} ({v.reached} of {v.runs})" if v.cpu_to_threshold is not None else (
            f"not reached (0 of {v.runs})")  # fmt: skip
        lines.append(f"| {v.name} | {v.runs} | {_ci(v.iqm)} | {_ci(v.improvement)} | {_ci(v.paired)} | "
                     f"{v.train_cpu_s:.1f} | {steps} | {reach} | {v.verdict} |")  # fmt: skip
    lines.append("")
    for name, c in described.items():
        sets = f", --set {' '.join(c['overrides'])}" if c["overrides"] else ""
        lines.append(f"- {name} (`{c['config']}`{sets}): {c['description']}")
    threshold = f"{bar:.2f}" if bar is not None else "n/a (no training returns)"
    lines.append(f"- threshold: {control}'s final training return, IQM over its runs: {threshold}. Final score: "
                 "the run's final evaluation (`summary.json` eval_mean).")  # fmt: skip
    for key, built in race.get("pretrained", {}).items():
        stage = built.get("stage", key)
        runs = sum(v.runs for v in verdicts if v.name in built["used_by"])
        share = f"{built['cpu_s'] / runs:.1f}" if runs else "n/a"
        lines.append(f"- pretraining ({built['produces']}, stage {stage}) was built once in {built['cpu_s']:.1f} "
                     f"CPU-s and used by {', '.join(built['used_by'])}: not in their training CPU-s above; "
                     f"amortised over their {runs} runs that is {share} CPU-s per run, not amortised "
                     f"{built['cpu_s']:.1f} per run.")  # fmt: skip
    lines += ["", decision_line(verdicts, winner, control)]
    return "\n".join(lines) + "\n"


def decision_line(verdicts: Sequence[Verdict], winner: str, control: str) -> str:
    if any(v.verdict == TOO_FEW for v in verdicts):
        fewest = min(v.paired_seeds for v in verdicts if v.verdict == TOO_FEW)
        return (f"Decision: too few seeds to decide ({fewest} paired; a verdict needs {MIN_SEEDS}); "
                f"train {winner} until more seeds say otherwise.")  # fmt: skip
    better = [v.name for v in verdicts if v.verdict == BETTER]
    if not better:
        return (f"Decision: no contender is shown better than {control} at this budget (each paired difference's "
                f"{LEVEL:.0%} interval holds 0 or lies below it): train {control}.")  # fmt: skip
    return (f"Decision: {winner} wins (shown better than {control}: {', '.join(better)}; the highest IQM among "
            f"them wins): train {winner}.")  # fmt: skip


def write(
    out: Path,
    race: dict[str, Any],
    verdicts: Sequence[Verdict],
    winner: str,
    bar: float | None,
    rows: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """``table.md``, ``decision.json`` and ``race.png`` in the race directory; returns the decision (its
    ``table``: the markdown)."""
    text = render(race, verdicts, winner, bar, rows)
    (out / TABLE_FILE).write_text(text)
    contender = next(c for c in race["contenders"] if c["name"] == winner)
    decision = {"winner": winner, "config": contender["config"], "overrides": [*contender["overrides"], *race["sets"]],
                "threshold": bar, "decision": decision_line(verdicts, winner, race["contenders"][0]["name"]),
                "contenders": [v.as_dict() for v in verdicts]}  # fmt: skip
    (out / DECISION_FILE).write_text(json.dumps(decision, indent=2) + "\n")
    plot(rows, [c["name"] for c in race["contenders"]], out / PLOT_FILE)
    return {**decision, "table": text}


def plot(rows: Sequence[dict[str, Any]], names: Sequence[str], path: Path) -> None:
    """Score against CPU: each run's training return over its CPU-seconds (thin lines) and its final score at
    the CPU it used (dots), one colour per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, name in enumerate(names):
        colour = f"C{i}"
        mine = [r for r in rows if r["contender"] == name]
        for j, row in enumerate(mine):
            if row.get("curve"):
                cpu, value = zip(*row["curve"], strict=True)
                ax.plot(cpu, value, color=colour, alpha=0.35, linewidth=1)
            ax.scatter([row["train_cpu_s"]], [row["score"]], color=colour, label=name if j == 0 else None, zorder=3)
    ax.set_xlabel("CPU-seconds of the run's process")
    ax.set_ylabel("training return (lines), final score (dots)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
