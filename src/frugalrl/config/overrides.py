"""``--set key.sub=value`` overrides on a parsed config, and the dotted view of a nested one."""

from __future__ import annotations

from typing import Any

import yaml

from frugalrl.credentials import shown
from frugalrl.errors import ConfigError


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists are kept as values)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _switch_kind(node: dict[str, Any], keys: list[str], value: Any, given: set[tuple[str, ...]]) -> None:
    """``--set <section>.kind=other``: the file's ``<section>.settings`` were the old kind's, so they go
    (``--set selection.kind=all`` on a PivotRL config is its PPO baseline); settings from --set stay."""
    settings = (*keys[:-1], "settings")
    switched = keys[-1] == "kind" and node.get("kind") != value and "settings" in node
    if switched and not any(p[: len(settings)] == settings for p in given):
        del node["settings"]


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides; values are parsed as YAML scalars."""
    given: set[tuple[str, ...]] = set()
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{source}: override {shown(repr(item))} has no '='; allowed form: --set key.sub=value")
        path, raw = item.split("=", 1)
        keys = [k for k in path.strip().split(".") if k]
        if not keys:
            raise ConfigError(f"{source}: override {shown(repr(item))} has an empty key")
        node = data
        for key in keys[:-1]:
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"{source}: override {shown(repr(item))}: {key} is not a section")
            node = child
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or "not valid YAML"
            raise ConfigError(
                f"{source}: --set {shown(repr(item))}: the value does not parse ({problem}); quote it or complete it"
            ) from None
        _switch_kind(node, keys, value, given)
        node[keys[-1]] = value
        given.add(tuple(keys))
    return data
