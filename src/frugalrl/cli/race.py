"""``frugalrl race``: which technique pays on my task, at equal CPU (docs/race.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.cli.options import SetOption
from frugalrl.errors import FrugalError
from frugalrl.race import RaceSpec, judge, load_spec, parse_contenders, run_race
from frugalrl.race.table import write


def race(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Experiment YAML: your task and learner.")
    ] = None,
    contenders: Annotated[
        list[str] | None,
        typer.Option(
            help="The control first, then the others (list after --contenders): plain, random-skip, "
            "fewer-epochs, pivot, prioritized, tiered, LABEL=CONFIG.yaml or LABEL:KEY=VALUE[;KEY=VALUE]."
        ),
    ] = None,
    seeds: Annotated[int | None, typer.Option(min=1, help="Paired seeds 1..N per contender (default 5).")] = None,
    cpu_budget_s: Annotated[
        float | None, typer.Option("--cpu-budget-s", min=0.001, help="CPU-seconds of training per run.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Race directory to write.")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue the race in this directory.")] = None,
    parallel: Annotated[int, typer.Option(min=1, help="Runs at a time (each one process, one thread).")] = 1,
    overrides: SetOption = None,
) -> None:
    """Race techniques at equal CPU on your task over paired seeds; a table and a decision."""
    if resume is not None:
        if any(v is not None for v in (config, contenders, cpu_budget_s)) or overrides:
            raise FrugalError("--resume continues a race as it was started; give only --seeds (more seeds) and "
                              "--parallel, or start a new race with --out")  # fmt: skip
        if out is not None and out.resolve() != resume.resolve():
            raise FrugalError(f"--out {out} and --resume {resume} differ; a resumed race writes into its own directory")
        kept, _ = load_spec(resume)
        spec = RaceSpec(kept.config, kept.contenders, tuple(range(1, seeds + 1)) if seeds else kept.seeds,
                        kept.cpu_budget_s, kept.sets)  # fmt: skip
        out = resume
    else:
        if config is None or out is None or not contenders or cpu_budget_s is None:
            raise FrugalError("race needs --config, --contenders, --cpu-budget-s and --out (or --resume DIR); e.g. "
                              "frugalrl race --config configs/cartpole-ppo.yaml --contenders plain random-skip "
                              "--cpu-budget-s 15 --out runs/race")  # fmt: skip
        sets = tuple(overrides or ())
        spec = RaceSpec(config, tuple(parse_contenders(contenders, config, sets)), tuple(range(1, (seeds or 5) + 1)),
                        cpu_budget_s, sets)  # fmt: skip
    rows = run_race(spec, out, resume=resume is not None, parallel=parallel, echo=typer.echo)
    _, data = load_spec(out)
    verdicts, winner, bar = judge(rows, [c.name for c in spec.contenders])
    typer.echo("")
    typer.echo(write(out, data, verdicts, winner, bar, rows)["table"], nl=False)
    typer.echo(f"rows: {out / 'rows.jsonl'}; table: {out / 'table.md'}; decision: {out / 'decision.json'}; "
               f"plot: {out / 'race.png'}")  # fmt: skip
