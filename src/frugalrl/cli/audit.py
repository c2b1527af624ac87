"""``frugalrl audit``: re-run a past run and say whether its metrics reproduce."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.ops.audit import audit as run_audit


def audit(
    run_id: Annotated[str, typer.Argument(help="The MLflow run to re-run (its id, from the UI or summary.json).")],
    repo: Annotated[Path | None, typer.Option(help="The git repository holding the run's commit.")] = None,
    keep: Annotated[Path | None, typer.Option(help="Keep the downloaded and re-run files here.")] = None,
    allow_image_change: Annotated[
        bool, typer.Option("--allow-image-change", help="Call a run reproduced even if its image digest differs.")
    ] = False,
) -> None:
    """Re-run a tracked run on its recorded commit and config; exit 0 if its metrics reproduce, 1 if not.

    The re-run's image digest is this process's FRUGALRL_IMAGE_DIGEST (unknown outside the step image)."""
    result = run_audit(run_id, repo, keep=keep, allow_image_change=allow_image_change)
    verdict = "reproduced" if result["reproduced"] else "NOT reproduced"
    typer.echo(f"run {run_id} at {result['commit'][:12]} on {result['device']}: {verdict} ({result['criterion']})")
    for line in result["differences"] + result["notes"]:
        typer.echo(f"  {line}")
    if not result["reproduced"]:
        raise typer.Exit(1)
