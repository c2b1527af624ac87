"""The PEFT comparison on MuJoCo, with the seed's claimed table beside the measured one.

Runs ``frugalrl peft compare`` (``configs/halfcheetah-peft.yaml`` unless told otherwise) in
a subprocess, then renders its table for ``docs/benchmarks.md``. The seed document claims,
for MuJoCo: LoRA 3.2% of the training cost for 98% of the final score, Adapter 2.8% / 95%,
Prefix-tuning 4.1% / 89%, BitFit 1.9% / 82%, and LoRA best in most tasks.

    python benchmarks/peft_methods.py --source /path/to/halfcheetah-sac-run --steps 3000 --workers 2 --write
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import _harness
import _report

RESULTS = _report.RESULTS_DIR / "peft_methods.jsonl"

# The seed's table (cost %, score %). Its prefix-tuning row has no counterpart here: frugalrl's ``prefix`` is a
# bias shift of a layer's input, W(x + p) + b, not prefix-tuning, so it is not set beside that figure.
CLAIMS = {"lora": (3.2, 98.0), "adapter": (2.8, 95.0), "bitfit": (1.9, 82.0)}


def _fmt(value: str, spec: str = "{:.1f}") -> str:
    return "-" if value in ("", "None") else spec.format(float(value))


NO_ROWS = (
    "_No rows in `benchmarks/results/peft_methods.jsonl` yet. The figures this section held were measured before "
    "per-run rows were kept; they stay below, marked as archived, until the command is run again._"
)


def store(run: _harness.Run, common: dict, results: Path) -> list[dict]:
    """One row per line of the comparison's table (medians over seeds), with the comparison's summary."""
    out, summary = run.out, run.summary
    keep = ("source", "source_return", "steps", "seeds", "source_train_flops", "best_method")
    rows = []
    for line in csv.DictReader((out / "peft_table.csv").open()):
        row = _report.stamp(common, **{k: summary.get(k) for k in keep}, table_row=line)
        _report.append_row(results, row)
        rows.append(row)
    return rows


def report(stored: list[dict], results: Path = RESULTS) -> str:
    summary, rows = stored[0], [r["table_row"] for r in stored]
    lines = [*_report.rows_lines(stored, results), *(f"- {line}" for line in
        [
            f"source: {summary['source']} (SAC, RL Zoo settings), evaluation return {summary['source_return']:.1f} "
            "on the unchanged task",
            f"budget: {summary['steps']:,} env steps of fine-tuning per run (the first of them collected by the "
            f"source policy before updates), {summary['seeds']} seeds per method and target; medians over seeds",
            "cost: training FLOPs counted with torch's FLOP counter on the adapted networks (a frozen weight "
            "needs no weight gradient), and wall-clock of the fine-tuning loop, each as % of full fine-tuning's",
            "FLOPs % of source training: against training the source policy from scratch (what the seed's "
            "'% of the training cost' most plausibly means)",
            "every method adapts the actor and the twin critics; 'trainable %' is the actor's (the deployed policy)",
            "forgetting: the source task's return after fine-tuning against the source policy's, in %",
            "rows: one per line of the comparison's table (medians over seeds)",
        ])]  # fmt: skip
    header = ["target", "method", "seeds", "return", "% of full", "FLOPs % of full", "FLOPs % of source training",
              "time % of full", "trainable %",
              "source return after", "forgetting %", "seed claim (cost % / score %)"]  # fmt: skip
    table = []
    for r in rows:
        claim = CLAIMS.get(r["method"])
        table.append([
            r["target"], r["method"], r["seeds"], _fmt(r["eval_mean"]), _fmt(r["return_pct_of_full"]),
            _fmt(r["flops_pct_of_full"]), _fmt(r["flops_pct_of_source_training"], "{:.2f}"),
            _fmt(r["time_pct_of_full"]), _fmt(r["trainable_pct"], "{:.2f}"),
            _fmt(r["source_return_after"]), _fmt(r["forgetting_pct"]),
            f"{claim[0]} / {claim[1]}" if claim else "-",
        ])  # fmt: skip
    return "\n".join(lines) + "\n\n" + _report.markdown_table(header, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(_report.REPO_ROOT / "configs" / "halfcheetah-peft.yaml"))
    parser.add_argument("--source", help="the source SAC run (directory or models:/ URI); default: the config's")
    parser.add_argument("--steps", type=int, help="fine-tuning env steps per run; default: the config's")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "peft_methods")
    _report.add_output_args(parser, "peft_methods")
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common(load_before=_report.load_average())
        sets = [*args.overrides]
        sets += [f"peft.source={args.source}"] if args.source else []
        sets += [f"peft.steps={args.steps}"] if args.steps else []
        sets += [f"peft.seeds={args.seeds}"] if args.seeds else []
        # threads as the config has them: the comparison runs --workers processes of its own
        command = ["peft", "compare", "-c", args.config, "-o", args.out, "--workers", args.workers]
        return store(_harness.cli(command, args.out, sets, threads=None, cwd=Path.cwd()), common, args.results)

    _report.run_or_render("peft_methods", args, run, report, empty=NO_ROWS)


if __name__ == "__main__":
    main()
