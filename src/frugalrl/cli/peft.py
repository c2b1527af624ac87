"""``frugalrl peft``: compare parameter-efficient fine-tuning methods, apply an adapter to its base policy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.cli.options import SetOption
from frugalrl.config import load_config
from frugalrl.peft.compare import compare
from frugalrl.peft.store import apply_adapter
from frugalrl.peft.table import best_line
from frugalrl.policy_store import save_policy
from frugalrl.rundir import check_new_run_dir

peft_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Parameter-efficient fine-tuning: compare methods, apply adapters."
)


@peft_app.command("compare")
def peft_compare_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="Experiment YAML with a peft section.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the table, plot, adapters, summary.")],
    workers: Annotated[int, typer.Option(min=1, help="Fine-tuning runs in parallel (one process each).")] = 1,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted comparison in OUT.")] = False,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Write the table from the runs finished in OUT; run none.")
    ] = False,
    overrides: SetOption = None,
) -> None:
    """Fine-tune the source policy on every target with every method; write the comparison table."""
    summary = compare(load_config(config, overrides or []), out, workers, resume=resume, report_only=report_only)
    typer.echo((out / "peft_table.md").read_text())
    typer.echo(f"best: {best_line(summary['table'], summary['best_method'])}; table: {out / 'peft_table.csv'}")


@peft_app.command("apply")
def peft_apply_command(
    base: Annotated[str, typer.Argument(help="The base SAC policy: run directory or models:/NAME@ALIAS.")],
    adapter: Annotated[str, typer.Argument(help="adapter.pt, its directory, or an MLflow artifact URI (runs:/...).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the adapted policy.pt.")],
) -> None:
    """Load an adapter onto its base policy; writes OUT/policy.pt (loadable by evaluate)."""
    check_new_run_dir(out, resumable=False)  # never over a run's own policy.pt
    policy, config = apply_adapter(base, adapter)
    out.mkdir(parents=True, exist_ok=True)
    save_policy(out / "policy.pt", policy, config)
    typer.echo(f"{config.policy.adapter.method} adapter applied: {out / 'policy.pt'}")
