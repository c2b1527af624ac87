"""Commands about the installation and past runs rather than new ones: ``audit``, ``check``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


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
    # why here: torch, pydantic, gymnasium; frugalrl --help starts without them
    from frugalrl.audit import audit as run_audit

    result = run_audit(run_id, repo, keep=keep, allow_image_change=allow_image_change)
    verdict = "reproduced" if result["reproduced"] else "NOT reproduced"
    typer.echo(f"run {run_id} at {result['commit'][:12]} on {result['device']}: {verdict} ({result['criterion']})")
    for line in result["differences"] + result["notes"]:
        typer.echo(f"  {line}")
    if not result["reproduced"]:
        raise typer.Exit(1)


def check(
    benchmark_mode: Annotated[bool, typer.Option("--benchmark-mode", help="Add a short hardware probe.")] = False,
) -> None:
    """What works on this machine: torch, ALE, MuJoCo, Box2D, MLflow, kfp."""
    # why here: numpy; frugalrl --help starts without it
    from frugalrl.doctor import print_report, run_checks

    results = run_checks(benchmark_mode)
    print_report(results)
    if any(not r.ok for r in results):
        raise typer.Exit(1)
