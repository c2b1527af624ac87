"""The ``frugalrl`` command, one module per command group. Thin: it parses arguments and calls the library.

``root`` holds the typer app, the order commands are listed in and ``main`` (every user error one
line and exit code 2, Ctrl-C 130); ``training``, ``pretrain``, ``configs``, ``pipeline``, ``peft``,
``jobs``, ``image``, ``latent`` and ``ops`` hold the commands. Modules import typer,
``frugalrl.errors`` and stdlib-only modules (``frugalrl.images``) at module level: each command imports
the library it calls (a ``# why here:`` comment says what that defers), so ``frugalrl --help`` starts
without torch or pydantic.
"""

from frugalrl.cli.root import LIST_OPTIONS, app, main, spread_list_options
from frugalrl.cli.training import MAX_EVAL_EPISODES

__all__ = ["LIST_OPTIONS", "MAX_EVAL_EPISODES", "app", "main", "spread_list_options"]
