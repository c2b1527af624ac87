"""The config's schema version, and the layout before it (schema 0), which is refused with what to write instead.

frugalrl reads one layout, schema ``SCHEMA_VERSION``, and every dump names it (``schema_version`` in a run's
config.yaml, in policy files, in checkpoints). Before configs were versioned (schema 0) some keys sat
elsewhere: a technique's settings flat in its section (``replay.alpha``), PivotRL's in a top-level ``pivot``
section, switches where a kind is chosen now (``meta.enabled``, ``latent.enabled``, ``distributed.mode``).
Such a key is not read under its new name: the config is refused with one line naming the key to write.
"""

from __future__ import annotations

from typing import Any

from frugalrl.config.overrides import flatten

SCHEMA_VERSION = 1
SCHEMA_ZERO = 0  # the layout before versioned configs; a dump without ``schema_version`` is in it
TODAYS_KEYS = "today's keys: frugalrl config explain, docs/configuration.md"

# Schema 0 keys that moved into ``<section>.settings``: the kinds that read each (the first is the one to name).
_MOVED_INTO_SETTINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "selection": {"keep_fraction": ("random", "epochs")},
    "replay": {"alpha": ("prioritized",), "beta": ("prioritized", "tiered"), "beta_steps": ("prioritized", "tiered"),
               "tier_weights": ("tiered",), "hot_quantile": ("tiered",), "warm_quantile": ("tiered",)},
    "meta": dict.fromkeys(("interval", "lr_bounds", "gamma_bounds", "exploration_bounds", "lr_down", "lr_up",
                           "gamma_step", "exploration_factor", "rise_tolerance", "settle_tolerance", "collapse_rate"),
                          ("rmt",)),
}  # fmt: skip
_DEFAULT_KIND = {"selection": "all", "replay": "uniform", "meta": "fixed"}
# Schema 0 switches, a kind now: the old key -> (the kind's key, the kind when true, the kind when false).
_SWITCHES = {"meta.enabled": ("meta.kind", "rmt", "fixed"), "latent.enabled": ("rollout.kind", "latent", "real")}
# Every schema 0 key inside a section (the top-level ``pivot`` section is one as a whole).
_IN_SECTIONS: dict[str, tuple[str, ...]] = {
    **{section: tuple(keys) for section, keys in _MOVED_INTO_SETTINGS.items()},
    "meta": (*_MOVED_INTO_SETTINGS["meta"], "enabled"),
    "latent": ("enabled",),
    "distributed": ("mode", "topk"),
}


def _kind_then(data: dict[str, Any], section: str, key: str) -> str:
    """``<section>.kind: X and `` when the section's kind does not read ``key``, else nothing."""
    node = data.get(section)
    kind = node.get("kind", _DEFAULT_KIND[section]) if isinstance(node, dict) else _DEFAULT_KIND[section]
    readers = _MOVED_INTO_SETTINGS[section][key]
    return "" if kind in readers else f"{section}.kind: {readers[0]} and "


def _fix(key: str, value: Any, data: dict[str, Any]) -> str | None:
    """What to write instead of the dotted ``key`` (set to ``value``) when it is a schema 0 key; else None."""
    section, _, rest = key.partition(".")
    if section == "pivot":
        chosen = isinstance(data.get("selection"), dict) and data["selection"].get("kind") == "pivot"
        kind = "" if chosen else "selection.kind: pivot and "
        return f"{kind}selection.settings.{rest}" if rest else f"{kind}its keys under selection.settings"
    if key in _SWITCHES:
        kind_key, on, off = _SWITCHES[key]
        kind = {True: on, False: off}[value] if isinstance(value, bool) else f"{on} or {off}"
        return f"{kind_key}: {kind}"
    if key == "distributed.mode":
        return f"distributed.kind: {value}" if isinstance(value, str) else "distributed.kind: topk or dense"
    if key == "distributed.topk":
        return "distributed.kind: topk and distributed.settings.share"
    if rest in _MOVED_INTO_SETTINGS.get(section, {}):
        return f"{_kind_then(data, section, rest)}{section}.settings.{rest}"
    return None


def schema_zero_problem(data: dict[str, Any]) -> str | None:
    """One line naming the first schema 0 key of ``data`` (a tuning search key included) and what to write
    instead; None when it has none."""
    # (how the line names it, the dotted key, its value): every key of the config, and every search key
    keys: list[tuple[str, str, Any]] = [(key, key, value) for key, value in flatten(data).items()]
    tuning = data.get("tuning")
    space = tuning.get("space") if isinstance(tuning, dict) else None
    if isinstance(space, dict):
        keys += [(f"tuning.space key {key}", str(key), None) for key in space]
    fixes = [(named, fix) for named, key, value in keys if (fix := _fix(key, value, data)) is not None]
    if not fixes:
        return None
    (named, fix), more = fixes[0], len(fixes) - 1
    others = f"and {more} more schema 0 key{'s' if more > 1 else ''}; " if more else ""
    return (
        f"{named} is a key of schema 0 (the layout before versioned configs), which this frugalrl no longer reads: "
        f"write {fix} instead ({others}{TODAYS_KEYS})"
    )


def other_schema_problem(version: int) -> str | None:
    """One line saying why a config stating ``schema_version: version`` is not read; None for today's."""
    if version == SCHEMA_VERSION:
        return None
    if version > SCHEMA_VERSION:
        return (
            f"written in schema {version}, newer than this frugalrl (schema {SCHEMA_VERSION}): upgrade frugalrl, "
            f"or write it in schema {SCHEMA_VERSION} ({TODAYS_KEYS})"
        )
    before = " (the layout before versioned configs)" if version == SCHEMA_ZERO else ""
    return (
        f"written in schema {version}{before}, which this frugalrl (schema {SCHEMA_VERSION}) no longer reads: "
        f"rewrite it with schema_version: {SCHEMA_VERSION} ({TODAYS_KEYS})"
    )


def policy_view_of_schema_zero(data: dict[str, Any]) -> dict[str, Any]:
    """A schema 0 dump (the config in a policy file of before versioning) without its schema 0 keys, to rebuild
    the policy and evaluate it, never to train: those keys are training settings that do not shape the network,
    but for ``latent.enabled``, which put the latent encoder before it and is kept as ``rollout.kind``."""
    data = {key: value for key, value in data.items() if key != "pivot"}
    latent = data.get("latent")
    if isinstance(latent, dict) and latent.get("enabled") is True:
        data["rollout"] = {"kind": "latent"}
    for section, keys in _IN_SECTIONS.items():
        if isinstance(data.get(section), dict):
            data[section] = {key: value for key, value in data[section].items() if key not in keys}
    tuning = data.get("tuning")
    if isinstance(tuning, dict) and isinstance(tuning.get("space"), dict):  # search keys as they were then
        space = {key: dim for key, dim in tuning["space"].items() if _fix(str(key), None, data) is None}
        data["tuning"] = {**tuning, "space": space}
    return data
