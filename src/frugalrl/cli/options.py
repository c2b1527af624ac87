"""Option types several command groups share."""

from __future__ import annotations

from typing import Annotated

import typer

SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override a config value: --set ppo.learning_rate=3e-4")
]
