"""The PEFT comparison, kept run by run so that it can be measured in parts across sessions.

Runs ``frugalrl peft compare`` (``configs/invdoublependulum-peft.yaml`` unless told otherwise) in a
subprocess and keeps every finished run (one method or reference, one target, one seed) as a row of
``benchmarks/results/peft_methods.jsonl`` the moment it appears in the comparison's ``peft_runs.csv``.
The table is rendered from those rows (``frugalrl.peft.table.aggregate``), complete or not.

A later session continues the same comparison: the source run (``frugalrl train CONFIG``) is kept in the
repository (``--source``, ``benchmarks/artifacts/invdoublependulum-peft-source``: its config, checkpoint and
summary), because training it again gives other weights on another CPU vendor (kernel rounding). Every row
carries the source's fingerprint (sha256 of the actor's weights) and the config's hash, the kept rows that
match both are put back into the comparison's directory, and ``peft compare --resume`` runs only the rest.
A source that differs (``--retrain-source``, or another config) starts a comparison of its own; the report
says which rows it uses. ``--stop-after-s`` ends the comparison cleanly after that long (what finished is
kept).

The seed document claims, for MuJoCo: LoRA 3.2% of the training cost for 98% of the final score,
Adapter 2.8% / 95%, Prefix-tuning 4.1% / 89%, BitFit 1.9% / 82%, and LoRA best in most tasks.

    python -m benchmarks.peft_methods --workers 2 --stop-after-s 3000 --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

from . import _harness, _report
from ._peft import CLAIMS, contest_rows, table_of

RESULTS = _report.RESULTS_DIR / "peft_methods.jsonl"
CONFIG = Path("configs") / "invdoublependulum-peft.yaml"
SOURCE = Path("benchmarks") / "artifacts" / "invdoublependulum-peft-source"
SOURCE_FILES = ("config.yaml", "checkpoint.pt", "summary.json")  # what `load_source` and the table read

NO_ROWS = (
    "_No rows in `benchmarks/results/peft_methods.jsonl` yet. The figures this section held were measured before "
    "per-run rows were kept; they stay below, marked as archived, until the command is run again._"
)


def source_fingerprint(source_dir: Path) -> str:
    """sha256 of the source actor's weights (names and float bytes, in name order): two trainings of the
    source are the same policy exactly when this agrees."""
    from frugalrl.checkpoint import load_checkpoint

    state = load_checkpoint(source_dir / "checkpoint.pt")["agent"]["policy"]
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def contest_hash(config: object) -> str:
    """The config's hash with ``peft.source`` left out (where the source lies differs between machines)."""
    peft = config.peft.model_copy(update={"source": None})  # type: ignore[attr-defined]
    return config.model_copy(update={"peft": peft}).hash()  # type: ignore[attr-defined]


def report(stored: list[dict], results: Path = RESULTS) -> str:
    from frugalrl.peft.table import steps_label

    head, table = stored[-1], table_of(stored)
    kept = {(r["run"]["target"], r["run"]["method"]) for r in stored}
    missing = [f"{t}/{m}" for t in head["targets"] for m in head["contenders"] if (t, m) not in kept]
    lines = [*_report.rows_lines(stored, results), *(f"- {line}" for line in [
        f"config: `{head['config']}` (hash {head['contest']}); source: SAC on {head['env_id']}, "
        f"{head['source_steps']:,} env steps, fingerprint {head['source_sha256'][:12]}, evaluation return "
        f"{head['source_return']:.1f} on the unchanged task",
        f"runs kept: {len(stored)} of {head['expected_runs']}"
        + (f"; not yet run: {', '.join(missing)}" if missing else ""),
        f"budget: {head['steps']:,} env steps per run (the first {head['warmup_steps']:,} collected by the source "
        f"policy, or uniform random actions for scratch), {head['seeds']} seeds, {head['eval_episodes']} "
        "evaluation episodes per task; medians over seeds, [min, max] over seeds beside the return",
        "% of drop recovered: (return - none) / (full - none); steps to 90% of full: the env step at which the "
        "mean of 3 consecutive training episodes first reaches 90% of full fine-tuning's median final return "
        "(median over seeds; 'not reached' when a seed's median never does)",
        "cost: training FLOPs counted with torch's FLOP counter on the adapted networks (a frozen weight needs no "
        "weight gradient) and the fine-tuning loop's wall-clock, each as % of full fine-tuning's and of training "
        "the source from scratch; 'trainable %' is the actor's (the deployed policy)",
        "forgetting: the source task's return after fine-tuning against the source policy's, in %",
    ])]  # fmt: skip
    header = ["target", "method", "seeds", "return [min, max]", "% of full", "% of drop recovered",
              "steps to 90% of full", "FLOPs % of full", "FLOPs % of source training", "time % of full",
              "time % of source training", "trainable %", "forgetting %", "seed claim (cost % / score %)"]  # fmt: skip
    rows = []
    for r in table:
        claim = CLAIMS.get(r["method"])
        rows.append([
            r["target"], r["method"], str(r["seeds"]),
            f"{r['eval_mean']:.1f} [{r['eval_low']:.1f}, {r['eval_high']:.1f}]",
            _report.opt(r["return_pct_of_full"], "{:.1f}"), _report.opt(r["drop_recovered_pct"], "{:.1f}"),
            steps_label(r["steps_to_90pct_of_full"]), _report.opt(r["flops_pct_of_full"], "{:.1f}"),
            _report.opt(r["flops_pct_of_source_training"], "{:.2f}"), _report.opt(r["time_pct_of_full"], "{:.1f}"),
            _report.opt(r["time_pct_of_source_training"], "{:.2f}"), f"{r['trainable_pct']:.2f}",
            _report.opt(r["forgetting_pct"], "{:.1f}"), f"{claim[0]} / {claim[1]}" if claim else "-",
        ])  # fmt: skip
    return "\n".join(lines) + "\n\n" + _report.markdown_table(header, rows)


def _keep_new_runs(runs_csv: Path, kept: set[tuple], results: Path, common: dict, stamp: dict) -> None:
    """Append every run of ``runs_csv`` not yet kept to ``results`` (called while the comparison runs)."""
    from frugalrl.peft.table import read_runs

    if not runs_csv.is_file():
        return
    for run in read_runs(runs_csv):
        key = (run["target"], run["method"], run["seed"])
        if key not in kept:
            kept.add(key)
            _harness.record(results, _report.stamp(common, **stamp, run=run, load_after=_report.load_average()),
                            f"kept {key[0]} {key[1]} seed {key[2]}: return {run['eval_mean']:.1f}")  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    from frugalrl.config import load_config
    from frugalrl.peft.table import RUN_FIELDS, read_runs, write_csv
    from frugalrl.rundir import start_run_dir

    common = _report.batch_common(load_before=_report.load_average())
    sets = [*args.overrides, *([f"peft.steps={args.steps}"] if args.steps else []),
            *([f"peft.seeds={args.seeds}"] if args.seeds else [])]  # fmt: skip
    source_dir, compare_dir = args.source, args.out / "compare"
    if args.retrain_source or not (source_dir / "summary.json").is_file():
        trained = args.out / "source"
        shutil.rmtree(trained, ignore_errors=True)
        _harness.train(args.config, trained, sets, threads=None, cwd=Path.cwd())
        source_dir.mkdir(parents=True, exist_ok=True)
        for name in SOURCE_FILES:
            shutil.copy2(trained / name, source_dir / name)
    source = json.loads((source_dir / "summary.json").read_text())
    sets.append(f"peft.source={source_dir.resolve()}")
    config = load_config(args.config, [_harness.TRACKING_OFF, *sets])
    peft = config.peft
    contenders = [*peft.methods, *peft.references]
    stamp = {
        "config": str(args.config), "contest": contest_hash(config), "source_sha256": source_fingerprint(source_dir),
        "env_id": config.env.id, "source_steps": config.sac.total_timesteps, "source_return": source["eval_mean"],
        "source_train_flops": source["train_flops"], "source_train_s": source["wall_s"] - source["eval_s"],
        "targets": [t.name for t in peft.targets], "methods": list(peft.methods), "contenders": contenders,
        "seeds": peft.seeds, "steps": peft.steps, "warmup_steps": peft.warmup_steps,
        "eval_episodes": peft.eval_episodes, "expected_runs": len(contenders) * len(peft.targets) * peft.seeds,
    }  # fmt: skip
    earlier = [r for r in _report.read_rows(args.results)
               if (r.get("contest"), r.get("source_sha256")) == (stamp["contest"], stamp["source_sha256"])]  # fmt: skip
    if not (compare_dir / "config.yaml").is_file():
        start_run_dir(config, compare_dir)  # what `peft compare` writes first; then --resume continues it
    runs_csv = compare_dir / "peft_runs.csv"
    present = read_runs(runs_csv) if runs_csv.is_file() else []
    have = {(r["target"], r["method"], r["seed"]) for r in present}
    back = [r["run"] for r in contest_rows(earlier) if (r["run"]["target"], r["run"]["method"], r["run"]["seed"])
            not in have]  # fmt: skip
    if back:  # kept rows of an earlier session: the comparison skips them
        rows = [{**r, "curve": json.dumps(r.get("curve", []))} for r in [*present, *back]]
        write_csv(runs_csv, rows, RUN_FIELDS)
    kept = {(r["run"]["target"], r["run"]["method"], r["run"]["seed"]) for r in earlier}
    command = ["peft", "compare", "-c", args.config, "-o", compare_dir, "--workers", args.workers, "--resume"]
    result = _harness.cli(command, compare_dir, sets, threads=None, cwd=Path.cwd(), stop_after_s=args.stop_after_s,
                          poll=lambda: _keep_new_runs(runs_csv, kept, args.results, common, stamp))  # fmt: skip
    if result.stopped:
        print(f"stopped after {args.stop_after_s:.0f} s; rerun the same command to continue", flush=True)
    return contest_rows(_report.read_rows(args.results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--steps", type=int, help="fine-tuning env steps per run; default: the config's")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--stop-after-s", type=float, help="end the comparison after this long; rows are kept")
    parser.add_argument("--source", type=Path, default=SOURCE,
                        help="the source run (trained there by `frugalrl train CONFIG` when absent)")  # fmt: skip
    parser.add_argument("--retrain-source", action="store_true",
                        help="train the source again (a new comparison: its fingerprint differs)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("runs") / "peft_methods",
                        help="the comparison's directory, kept between invocations")  # fmt: skip
    _report.add_output_args(parser, "peft_methods")
    args = parser.parse_args()
    _report.run_or_render("peft_methods", args, run, report, select=lambda kept, _: contest_rows(kept), empty=NO_ROWS)


if __name__ == "__main__":
    main()
