"""Environments: the factory, the fast vector env and the wrappers.

The names below stay importable from ``frugalrl.envs``. They are loaded on first use (PEP 562), as in
``frugalrl.tracking``, so importing one submodule does not import the others: ``frugalrl.config``'s env-id
check imports ``frugalrl.envs.registry``, and an eager package would run ``envs.factory``, which imports
``frugalrl.config`` (an import cycle through this file).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {  # name -> the submodule that defines it
    "make_vec_env": "factory",
    **dict.fromkeys(["is_atari", "validate_env_id"], "registry"),
    "FastSyncVectorEnv": "vector",
    **dict.fromkeys(["env_state_dict", "load_env_state_dict", "set_training"], "wrappers"),
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'frugalrl.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"frugalrl.envs.{_HOME[name]}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
