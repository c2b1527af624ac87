"""The PEFT comparison's results: its per-run rows (``peft_runs.csv``) read and written, and the
table aggregated and rendered from them (Markdown, a plot), whether the comparison is complete or not.

Running the comparison is ``frugalrl.peft.compare``; this module needs none of it, so a benchmark or a
report renders a table from kept rows without importing the learners.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.errors import CheckpointError
from frugalrl.files import read_text
from frugalrl.peft.finetune import REFERENCES

RUN_FIELDS = ["target", "method", "seed", "eval_mean", "source_eval_mean", "trainable", "trainable_share",
              "critic_trainable", "train_flops", "train_s", "env_steps", "curve"]  # fmt: skip
TABLE_FIELDS = ["target", "method", "seeds", "eval_mean", "eval_low", "eval_high", "return_pct_of_full",
                "drop_recovered_pct", "steps_to_90pct_of_full", "flops_pct_of_full", "flops_pct_of_source_training",
                "time_pct_of_full", "time_pct_of_source_training", "trainable", "trainable_pct",
                "source_return_after", "forgetting_pct"]  # fmt: skip
CURVE_WINDOW = 3  # training episodes averaged before a curve counts as having reached a threshold


def _median(rows: list[dict], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def steps_to_reach(curve: list[list[float]], threshold: float, window: int = CURVE_WINDOW) -> float:
    """The env step at which the mean return of the last ``window`` training episodes first reaches
    ``threshold``; ``inf`` when it never does within the run."""
    returns = [r for _, r in curve]
    for i in range(window - 1, len(returns)):
        if statistics.mean(returns[i - window + 1 : i + 1]) >= threshold:
            return float(curve[i][0])
    return math.inf


def _curve(row: dict) -> list[list[float]]:
    """A run's training curve: JSON text in a fresh row (its CSV cell), a list once read back."""
    curve = row.get("curve") or []
    return json.loads(curve) if isinstance(curve, str) else curve


def _interval(values: list[float]) -> tuple[float, float]:
    """The range over seeds (with 3 seeds the honest interval: no bootstrap from three numbers)."""
    return float(min(values)), float(max(values))


def aggregate(
    rows: list[dict], source_return: float, source_flops: float | None = None, source_train_s: float | None = None
) -> list[dict[str, Any]]:
    """Per target and method: medians over seeds, ratios against full fine-tuning's medians and against
    training the source from scratch (when known); the drop recovered against the ``none`` reference."""
    table = []
    for target in dict.fromkeys(r["target"] for r in rows):
        mine = [r for r in rows if r["target"] == target]
        full = [r for r in mine if r["method"] == "full"]
        none = [r for r in mine if r["method"] == "none"]
        ref = {k: _median(full, k) for k in ("eval_mean", "train_flops", "train_s")} if full else {}
        untrained_return = _median(none, "eval_mean") if none else None
        threshold = 0.9 * ref["eval_mean"] if full and ref["eval_mean"] > 0 else None  # 90% of a negative: undefined
        for method in dict.fromkeys(r["method"] for r in mine):
            runs = [r for r in mine if r["method"] == method]
            eval_mean, after = _median(runs, "eval_mean"), _median(runs, "source_eval_mean")
            low, high = _interval([r["eval_mean"] for r in runs])

            def pct(key: str, value: float, ref: dict = ref) -> float | None:
                return 100 * value / ref[key] if ref.get(key, 0) > 0 else None

            gap = ref["eval_mean"] - untrained_return if full and untrained_return is not None else None
            reach = None
            if threshold is not None and method != "none":
                reach = float(statistics.median(steps_to_reach(_curve(r), threshold) for r in runs))
            table.append({
                "target": target, "method": method, "seeds": len(runs), "eval_mean": eval_mean,
                "eval_low": low, "eval_high": high,
                "return_pct_of_full": pct("eval_mean", eval_mean),
                "drop_recovered_pct": 100 * (eval_mean - untrained_return) / gap if gap and gap > 0 else None,
                "steps_to_90pct_of_full": reach,
                "flops_pct_of_full": pct("train_flops", _median(runs, "train_flops")),
                "flops_pct_of_source_training": 100 * _median(runs, "train_flops") / source_flops
                if source_flops else None,
                "time_pct_of_full": pct("train_s", _median(runs, "train_s")),
                "time_pct_of_source_training": 100 * _median(runs, "train_s") / source_train_s
                if source_train_s else None,
                "trainable": int(runs[0]["trainable"]), "trainable_pct": 100 * runs[0]["trainable_share"],
                "source_return_after": after,
                "forgetting_pct": 100 * (source_return - after) / abs(source_return) if source_return else None,
            })  # fmt: skip
    return table


def steps_label(value: float | None) -> str:
    """``steps_to_90pct_of_full`` as the table shows it."""
    if value is None:
        return "-"
    return "not reached" if math.isinf(value) else f"{value:,.0f}"


def _fmt(value: Any, spec: str = "{:.1f}") -> str:
    return "-" if value is None else spec.format(value)


def markdown(table: list[dict], source_return: float, steps: int) -> str:
    lines = [
        f"source policy return {source_return:.1f}; {steps:,} env steps of fine-tuning per run; medians over seeds",
        "",
        "| target | method | seeds | return [min, max] | % of full | % of drop recovered | steps to 90% of full "
        "| FLOPs % of full | FLOPs % of source training | time % of full | time % of source training "
        "| trainable | trainable % | source return after | forgetting % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table:
        lines.append(
            f"| {r['target']} | {r['method']} | {r['seeds']} | {r['eval_mean']:.1f} [{r['eval_low']:.1f}, "
            f"{r['eval_high']:.1f}] | {_fmt(r['return_pct_of_full'])} | {_fmt(r['drop_recovered_pct'])} "
            f"| {steps_label(r['steps_to_90pct_of_full'])} "
            f"| {_fmt(r['flops_pct_of_full'])} | {_fmt(r['flops_pct_of_source_training'], '{:.2f}')} "
            f"| {_fmt(r['time_pct_of_full'])} | {_fmt(r['time_pct_of_source_training'], '{:.2f}')} "
            f"| {r['trainable']:,} | {r['trainable_pct']:.2f} | {r['source_return_after']:.1f} "
            f"| {_fmt(r['forgetting_pct'])} |"
        )
    return "\n".join(lines) + "\n"


def plot(table: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    markers = "osD^v<>"
    for i, target in enumerate(dict.fromkeys(r["target"] for r in table)):
        rows = [r for r in table if r["target"] == target and r["return_pct_of_full"] is not None]
        rows = [r for r in rows if r["flops_pct_of_full"] is not None]
        ax.scatter([r["flops_pct_of_full"] for r in rows], [r["return_pct_of_full"] for r in rows],
                   marker=markers[i % len(markers)], label=target)  # fmt: skip
        for r in rows:
            ax.annotate(r["method"], (r["flops_pct_of_full"], r["return_pct_of_full"]), fontsize=7)
    ax.set_xlabel("training FLOPs, % of full fine-tuning")
    ax.set_ylabel("target return, % of full fine-tuning")
    ax.set_title("PEFT methods: return vs cost")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buffer.getvalue().encode())


def best_method(table: list[dict]) -> str | None:
    """The parameter-efficient method with the highest median target return, averaged over targets."""
    scores: dict[str, list[float]] = {}
    for r in table:
        if r["method"] != "full" and r["method"] not in REFERENCES:
            scores.setdefault(r["method"], []).append(r["eval_mean"])
    return max(scores, key=lambda m: statistics.mean(scores[m])) if scores else None


def _mean_returns(table: list[dict], methods: tuple[str, ...]) -> dict[str, float]:
    """Each of ``methods`` that ran: its eval return, mean over the targets."""
    return {m: statistics.mean(r["eval_mean"] for r in table if r["method"] == m) for m in methods
            if any(r["method"] == m for r in table)}  # fmt: skip


def registered_method(table: list[dict], best: str | None) -> str | None:
    """What the comparison's ``best/`` policy is: the best parameter-efficient method, or ``none`` (the
    source as it is) where that method does not beat the untouched source (mean over targets). A registry
    should not receive a fine-tune that plays worse than its source."""
    if best is None:
        return None
    mean = _mean_returns(table, (best, "none"))
    return "none" if "none" in mean and mean[best] <= mean["none"] else best


def best_line(table: list[dict], best: str | None) -> str:
    """What the comparison found, in words: the best method where it beats no fine-tuning (the ``none``
    reference, mean over targets), else that the source already solves the target (``registered_method``)."""
    if best is None:
        return "no parameter-efficient method ran"
    mean = _mean_returns(table, (best, "none"))
    if registered_method(table, best) == "none":
        return (
            f"the source already solves the target: no fine-tuning returns {mean['none']:.1f}, the best "
            f"parameter-efficient method ({best}) {mean[best]:.1f}"
        )
    against = f" against {mean['none']:.1f} without fine-tuning" if "none" in mean else ""
    return f"{best} (return {mean[best]:.1f}{against})"


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``peft_runs.csv`` with their types back."""
    integers = {"seed", "trainable", "critic_trainable", "env_steps"}

    def typed(key: str, value: str) -> Any:
        if key in ("method", "target"):
            return value
        if key == "curve":  # absent (empty) in rows written before curves were kept
            return json.loads(value) if value else []
        return int(value) if key in integers else float(value)

    fix = "move it aside to run the comparison afresh, or restore it"
    text = read_text(path, "the PEFT runs table", fix)
    try:
        return [{k: typed(k, v) for k, v in raw.items()} for raw in csv.DictReader(io.StringIO(text))]
    except (ValueError, TypeError, AttributeError):  # a cell that is not its column's type, a short row
        raise CheckpointError(f"the PEFT runs table {path} is not one peft compare wrote; {fix}") from None
