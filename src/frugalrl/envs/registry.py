"""Which environment ids exist, with the ALE games registered and the user's env modules imported.

An id is gymnasium's: ``CartPole-v1``, ``ALE/Breakout-v5``, or ``module:EnvId`` for an env of one's own
(``gym.make`` imports ``module``, whose import registers ``EnvId``); ``env.imports`` names modules that
register ids on import without the prefix. ``ensure_registered`` is the one step every path that makes or
checks an env takes: it imports those modules and finds the id, or says in one line why not.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Iterable

import gymnasium as gym

from frugalrl.errors import EnvError

EXAMPLE_IDS = ("CartPole-v1", "LunarLander-v3", "BipedalWalker-v3", "HalfCheetah-v5", "Hopper-v5", "ALE/Breakout-v5")
OWN_ENVS = "docs/own-env.md"  # how a user's env module is found
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_WHERE = (
    "frugalrl finds a module installed in its Python environment or in a folder on PYTHONPATH, not in the working "
    "directory: export PYTHONPATH=/folder/holding/it, or pip install its package"
)
STEP_IMAGE_ENV = "FRUGALRL_STEP_IMAGE"  # set in the step image (images/Dockerfile.*)


def _where() -> str:
    """How to make a module importable, here: on this machine, or in the step image a pipeline step runs in."""
    if not os.environ.get(STEP_IMAGE_ENV):
        return _WHERE
    carried = os.environ.get("FRUGALRL_IMAGE_WITH", "[]")
    return (
        f"this step image ({os.environ.get('FRUGALRL_IMAGE_REF', 'its reference unknown')}; added with --with: "
        f"{carried}) cannot import it: add the module or its package with `frugalrl image build --with "
        "PATH_OR_REQUIREMENT`, push that image and run the pipeline with it (docs/own-env.md)"
    )


@functools.cache
def _register_ale() -> bool:
    try:
        import ale_py
    except ImportError:  # pragma: no cover - ale-py is a dependency
        return False
    gym.register_envs(ale_py)
    return True


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """``myenvs:Reach1D-v0`` -> (``myenvs``, ``Reach1D-v0``); an id without a module -> (None, the id)."""
    module, colon, bare = env_id.partition(":")
    return (module, bare) if colon else (None, env_id)


def import_env_modules(modules: Iterable[str]) -> None:
    """Import each module (registering its envs); a one-line ``EnvError`` naming one that cannot be imported."""
    for module in modules:
        if not _MODULE_NAME.fullmatch(module):
            raise EnvError(
                f"{module!r} is not a module name: write the name Python imports it by (myenvs, mypkg.envs), "
                f"not a file path; {_where()}"
            )
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = exc.name or module
            if missing == module or module.startswith(missing + "."):
                raise EnvError(
                    f"cannot import module {module!r} (ModuleNotFoundError: No module named {missing!r}): {_where()}"
                ) from None
            raise EnvError(
                f"importing module {module!r} failed: ModuleNotFoundError: No module named {missing!r} "
                f"(it imports {missing}); pip install it"
            ) from None
        except Exception as exc:  # the module's own code raised: its type and first line
            text = str(exc).strip()
            what = f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__
            raise EnvError(f"importing module {module!r} failed: {what}") from None


def _registered_by(modules: list[str], before: set[str]) -> list[str]:
    """The ids ``modules`` registered: new since ``before``, or with an entry point inside one of them."""

    def inside(spec: gym.envs.registration.EnvSpec) -> bool:
        point = spec.entry_point
        where = point.partition(":")[0] if isinstance(point, str) else getattr(point, "__module__", "") or ""
        return any(where == m or where.startswith(m + ".") for m in modules)

    return sorted(set(gym.registry) - before | {i for i, spec in gym.registry.items() if inside(spec)})


def ensure_registered(env_id: str, imports: Iterable[str] = ()) -> str:
    """Import ``imports`` and ``env_id``'s ``module:`` prefix, then find the id; the id gymnasium registered
    (``Reach1D-v0`` for ``myenvs:Reach1D-v0``). A one-line ``EnvError`` when a module cannot be imported or
    the id is not registered."""
    module, bare = split_env_id(env_id)
    modules = [*imports, *([module] if module else [])]
    before = set(gym.registry)
    import_env_modules(modules)
    if bare.startswith("ALE/"):
        _register_ale()
    try:
        gym.spec(bare)
    except gym.error.Error:
        if not modules:
            raise EnvError(f"not a registered environment; allowed: {known_env_ids()}") from None
        found = _registered_by(modules, before)
        names = " and ".join(repr(m) for m in modules)
        raise EnvError(
            f"not a registered environment: imported {names}, and {bare!r} is not among the ids registered there "
            f"({', '.join(found[:10]) + (', ...' if len(found) > 10 else '') if found else 'none'})"
        ) from None
    return bare


def validate_env_id(env_id: str, imports: Iterable[str] = ()) -> bool:
    """True when gymnasium (with the ALE games registered and the env modules imported) knows ``env_id``."""
    try:
        ensure_registered(env_id, imports)
    except EnvError:
        return False
    return True


def known_env_ids() -> str:
    return "a gymnasium id such as " + ", ".join(EXAMPLE_IDS) + f", or MODULE:EnvId for your own ({OWN_ENVS})"


def is_atari(env_id: str) -> bool:
    return split_env_id(env_id)[1].startswith("ALE/")


def ale_game_name(env_id: str) -> str:
    """``ALE/SpaceInvaders-v5`` -> ``space_invaders`` (the ROM name ale-py uses)."""
    _register_ale()
    env_id = split_env_id(env_id)[1]
    game = gym.spec(env_id).kwargs.get("game")
    if game:
        return str(game)
    stem = env_id.removeprefix("ALE/").split("-v")[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()
