"""The ``frugalrl`` command, one module per command group. Thin: it parses arguments and calls the library.

``root`` holds the command table (``COMMANDS``: each command's module and help line, in
``frugalrl --help`` order) and ``main`` (every user error one line and exit code 2, Ctrl-C 130);
``lazy`` the group that imports a command's module only when that command runs or shows its help.
``training``, ``pretrain``, ``configs``, ``pipeline``, ``peft``, ``jobs``, ``image``, ``latent``,
``audit`` and ``check`` hold the commands and import the library they call at module level.
``frugalrl --help`` reads the table alone, so it starts without torch or pydantic.
"""

from frugalrl.cli.root import COMMANDS, LIST_OPTIONS, app, main, spread_list_options

__all__ = ["COMMANDS", "LIST_OPTIONS", "app", "main", "spread_list_options"]
