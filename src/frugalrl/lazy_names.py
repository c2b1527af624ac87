"""A package's public names, each loaded from its submodule on first use (PEP 562).

``frugalrl.envs`` and ``frugalrl.tracking`` use it so that importing one submodule does not run the
others: an eager package file would pull heavy dependencies (mlflow) or close an import cycle
(``config`` -> ``envs.registry`` -> ``envs/__init__`` -> ``envs.factory`` -> ``config``).
Imports nothing of frugalrl.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str, namespace: dict[str, Any], home: dict[str, str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``, whose module globals are ``namespace``.

    ``home`` maps a name to the submodule that defines it."""
    names = sorted(home)

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return names

    return names, __getattr__, __dir__
