"""``frugalrl config``: validate an experiment file, print it resolved, explain its keys."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.cli.options import SetOption
from frugalrl.config import explain, kind_choices, load_config
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


@config_app.command("explain")
def config_explain(
    key: Annotated[
        str | None,
        typer.Argument(help="A dotted key (ppo.learning_rate), or a section (eval); none: every key."),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--set", help="The kind whose settings to explain: --set selection.kind=pivot (repeatable)."),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown tables; with no key, docs/configuration.md.")
    ] = False,
) -> None:
    """Explain config keys: type, default, allowed values and what each does.

    With no KEY, every key on one line each (type, default, description); a section (eval) lists its keys;
    a key (eval.every_steps) gets its type, default, allowed values (choices, bounds) and description.
    A section with a kind (rollout, replay, meta, selection, distributed) takes in settings the keys of the
    kind it names: selection.settings.keep_fraction is explained for the kind --set selection.kind=KIND
    names, else for every kind that has it. An unknown key exits 2 naming the closest ones.
    """
    for line in explain(key, kind_choices(kinds or []), markdown=markdown):
        typer.echo(line)
