"""Registries for the technique seams: a ``kind`` name maps to a factory and the settings it reads.

A technique registers itself in its own module (``SELECTORS.register("mine", settings=Mine)``).
Whenever a registry is asked for a kind it imports every module of its package, so a new
module dropped there is all a config needs to accept ``kind: mine``; nothing else changes.
Config validation asks the registry, so a typo in ``kind`` or in the kind's ``settings`` is a
one-line config error before anything runs.

This module imports nothing heavy: registering modules keep torch imports inside their factories.
It imports no frugalrl module either but the leaf ``strict_numbers``: the config layer, which validates
against the registries, finds each one by name through ``registry_for`` (``SEAMS``), so nothing in it
points upward.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from frugalrl.strict_numbers import BOOLEAN_NOT_NUMBER, boolean_numbers

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def add_once(table: dict[str, T], name: str, item: T, what: str) -> T:
    """``table[name] = item``, refusing a second, different ``item`` under a name already taken.

    Re-adding the same item is allowed: a module imported twice (a test's reload) registers again."""
    known = table.get(name)
    if known is not None and known != item:
        raise ValueError(f"{what} {name!r} is registered twice; give the new one its own name")
    table[name] = item
    return item


@dataclass(frozen=True)
class Entry(Generic[F]):
    kind: str
    factory: F
    settings: type[BaseModel] | None  # the model ``<section>.settings`` is validated against


class Registry(Generic[F]):
    """Kind name -> ``Entry``; ``what`` and ``section`` name it in error messages."""

    def __init__(self, what: str, section: str, package: str):
        self.what = what
        self.section = section
        self.package = package
        self._entries: dict[str, Entry[F]] = {}

    def register(self, kind: str, settings: type[BaseModel] | None = None) -> Callable[[F], F]:
        """Decorator: ``factory`` builds this kind; ``settings`` validates ``<section>.settings``."""

        def add(factory: F) -> F:
            known = self._entries.get(kind)
            if known is not None and known.factory is not factory:
                raise ValueError(f"{self.what} kind {kind!r} is registered twice; give the new one its own name")
            self._entries[kind] = Entry(kind, factory, settings)
            return factory

        return add

    def unregister(self, kind: str) -> None:
        """Forget ``kind`` (a test's or a notebook's registration); its module stays imported."""
        self._entries.pop(kind, None)

    def _discover(self) -> None:
        # every call: a module added to the package since is picked up; imported ones cost a dict look-up
        package = importlib.import_module(self.package)
        # a registry whose "package" is one module (PEFT methods) has no folder to discover
        for module in pkgutil.iter_modules(getattr(package, "__path__", [])):
            importlib.import_module(f"{self.package}.{module.name}")

    def kinds(self) -> list[str]:
        self._discover()
        return sorted(self._entries)

    def entry(self, kind: str) -> Entry[F]:
        self._discover()
        if kind not in self._entries:
            raise ValueError(f"not a registered {self.what}; known: {', '.join(self.kinds())}")
        return self._entries[kind]

    def settings_for(self, kind: str, settings: dict[str, Any]) -> BaseModel | None:
        """``settings`` validated by the kind's model; a ``ValueError`` naming the key otherwise."""
        model = self.entry(kind).settings
        if model is None:
            if settings:
                raise ValueError(f"{self.what} {kind!r} takes no settings; remove {self.section}.settings")
            return None
        refused = boolean_numbers(model.model_fields, settings) if isinstance(settings, dict) else []
        if refused:
            raise ValueError(f"{refused[0]}: {BOOLEAN_NOT_NUMBER}")
        try:
            return model.model_validate(settings)
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error.get("loc", ())) or "<root>"
            message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = f"unknown key for {kind!r}; allowed: {', '.join(model.model_fields)}"
            raise ValueError(f"{key}: {message}") from None


# Config section -> (module, name) of the registry its ``kind`` is looked up in: the seams a config names.
SEAMS: dict[str, tuple[str, str]] = {
    "selection": ("frugalrl.selectors", "SELECTORS"),
    "replay": ("frugalrl.replay.registry", "REPLAY_STORES"),
    "meta": ("frugalrl.meta.hyper", "HYPER_CONTROLLERS"),
    "ppo": ("frugalrl.algos.step_kinds", "STEP_KINDS"),  # its kind is ``ppo.compile`` (the key predates kinds)
    "distributed": ("frugalrl.fusion.reducers", "REDUCERS"),
    "rollout": ("frugalrl.rollouts", "ROLLOUT_SOURCES"),
    # a dict of methods, not one kind: ``peft.methods.<name>`` is validated by that method's settings
    "peft": ("frugalrl.peft.methods", "PEFT_METHODS"),
}


def registry_for(section: str) -> Registry[Any]:
    """The registry of config section ``section``'s kinds (its module imported on first use)."""
    module, name = SEAMS[section]
    return getattr(importlib.import_module(module), name)
