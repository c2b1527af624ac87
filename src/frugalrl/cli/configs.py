"""``frugalrl config``: validate an experiment file, print it resolved."""

from __future__ import annotations

from pathlib import Path

import typer

from frugalrl.cli.options import SetOption
from frugalrl.config import load_config
from frugalrl.envs.factory import check_env
from frugalrl.evaluation import protocol_note

config_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Experiment configs.")


@config_app.command("validate")
def config_validate(file: Path, overrides: SetOption = None) -> None:
    """Validate an experiment file and make its env once; prints the resolved config hash on success."""
    cfg = load_config(file, overrides or [])
    check_env(cfg)  # what the run will need from its env and algorithm, checked now
    typer.echo(f"{file}: valid ({cfg.env.id}, {cfg.algo}, config hash {cfg.hash()})")
    if note := protocol_note(cfg.env, cfg.eval.episodes):
        typer.echo(note)


@config_app.command("show")
def config_show(file: Path, overrides: SetOption = None) -> None:
    """Print the resolved config (defaults filled in, overrides applied)."""
    typer.echo(load_config(file, overrides or []).to_yaml(), nl=False)
