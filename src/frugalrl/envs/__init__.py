"""Environments: the factory, the fast vector env and the wrappers.

The names below stay importable from ``frugalrl.envs``. They are loaded on first use (PEP 562), as in
``frugalrl.tracking``, so importing one submodule does not import the others: ``frugalrl.config``'s env-id
check imports ``frugalrl.envs.registry``, and an eager package would run ``envs.factory``, which imports
``frugalrl.config`` (an import cycle through this file).
"""

from __future__ import annotations

from frugalrl.lazy_names import lazy_names

_HOME = {  # name -> the submodule that defines it
    "make_vec_env": "factory",
    **dict.fromkeys(["is_atari", "validate_env_id"], "registry"),
    "FastSyncVectorEnv": "vector",
    **dict.fromkeys(["env_state_dict", "load_env_state_dict", "set_training"], "wrappers"),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, globals(), _HOME)
