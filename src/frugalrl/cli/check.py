"""``frugalrl check``: what works on this machine.

A module of its own: the doctor reports a broken torch or ALE rather than failing to start, so this
command imports only ``frugalrl.ops.doctor`` (numpy; each check imports what it checks).
"""

from __future__ import annotations

from typing import Annotated

import typer

from frugalrl.ops.doctor import print_report, run_checks


def check(
    benchmark_mode: Annotated[bool, typer.Option("--benchmark-mode", help="Add a short hardware probe.")] = False,
) -> None:
    """What works on this machine: torch, ALE, MuJoCo, Box2D, MLflow, kfp."""
    results = run_checks(benchmark_mode)
    print_report(results)
    if any(not r.ok for r in results):
        raise typer.Exit(1)
