"""A command group whose commands are imported only when one is run or its help is shown.

Click's "LazyGroup" pattern, on typer's group class: commands are named in a table
``name -> LazyCommand("module:attr", short help)``. ``frugalrl --help`` lists every command from the
table alone, so it starts without torch or pydantic; ``frugalrl train ...`` imports
``frugalrl.cli.training`` (and what it imports at module level) and nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import typer
import typer.core
import typer.main


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (``"module:attr"``: a typer app or a command function) and its one-line help."""

    target: str
    short_help: str


def load_command(name: str, entry: LazyCommand) -> Any:  # noqa: ANN401 - a click command of typer's
    """Import ``entry.target`` and make it the click command called ``name``."""
    module, _, attr = entry.target.partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, typer.Typer):  # one command function: an app of its own, one command
        single = typer.Typer(add_completion=False)
        single.command(name)(found)
        found = single
    command = typer.main.get_command(found)
    command.name = name
    return command


class LazyGroup(typer.core.TyperGroup):
    """A typer group listing the commands of ``lazy`` by name and short help, importing one only when used."""

    def __init__(self, *, lazy: Mapping[str, LazyCommand], **attrs: Any) -> None:
        # A placeholder per command, holding its short help: what listing, typo suggestions and the
        # help screen read; ``get_command`` swaps in the real command the first time one is resolved.
        placeholders = {
            name: typer.core.TyperCommand(name, short_help=entry.short_help) for name, entry in lazy.items()
        }
        super().__init__(commands=placeholders, **attrs)
        self.lazy = dict(lazy)
        self._listing = False

    def format_help(self, ctx: Any, formatter: Any) -> None:  # noqa: ANN401 - click's context, formatter
        self._listing = True  # the command list needs names and short help only: no command is imported
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # noqa: ANN401 - click's context and command
        if self._listing or cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        command = load_command(cmd_name, self.lazy.pop(cmd_name))
        self.commands[cmd_name] = command
        return command
