"""Keys that moved into a kind's ``settings``: migrated on load, and the layout the hash is computed in.

A built-in technique reads its own ``<section>.settings``; before, its keys sat flat in the section
(``replay.alpha``, ``distributed.topk``, now ``distributed.settings.share``), in another section (the
top-level ``pivot``) or in a switch (``meta.enabled``, ``distributed.mode``, ``latent.enabled``, now
``rollout.kind``).
``migrate`` moves a config written that way to the new keys and logs one line per section saying
what to write instead. ``hash_layout`` turns a dump back into the old layout, so a config written
the old way, its migrated form and every checkpoint made from either keep one hash. A moved key
the chosen kind does not read (``replay.alpha`` with ``kind: uniform``) is dropped, with a line
saying so, and the hash takes its old default: a run's own ``config.yaml`` must give the hash its
checkpoints hold, and it cannot hold a value nothing reads. (An old run that set such a key off its
default therefore has a new hash; it computed nothing with it.)

One exception, for the gradient reducer: a dense run's hash holds ``topk: 1.0`` (``DENSE_SHARE``), not
the old default 0.2, since dense sends every entry and summary.json has always reported its share as
1.0; the dense contenders of ``benchmarks/fusion.py``, the only dense runs recorded, set
``distributed.topk=1.0`` and keep their hash. A dense run left at ``topk: 0.2`` gets a new one.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from frugalrl.config.runtime import DistributedConfig
from frugalrl.config.techniques import MetaConfig, PivotConfig, ReplayConfig, SelectionConfig

log = logging.getLogger("frugalrl.config")

# Keys that sat flat in a section, now in ``<section>.settings`` of the kinds whose settings have them,
# with the default each had there (a dump held every one, so the hash layout fills them in).
FLAT_MOVED: dict[str, dict[str, Any]] = {
    "selection": {"keep_fraction": 0.35},
    "replay": {"alpha": 0.6, "beta": 0.4, "beta_steps": 100_000, "tier_weights": [0.5, 0.3, 0.2],
               "hot_quantile": 0.9, "warm_quantile": 0.5},
    "meta": {"interval": 10, "lr_bounds": [1e-05, 0.001], "gamma_bounds": [0.9, 0.99],
             "exploration_bounds": [0.01, 0.3], "lr_down": 0.7, "lr_up": 1.1, "gamma_step": 0.005,
             "exploration_factor": 1.25, "rise_tolerance": 0.2, "settle_tolerance": 0.05, "collapse_rate": 0.02},
}  # fmt: skip
DEFAULT_KIND = {"selection": "all", "replay": "uniform", "meta": "fixed"}
# The kinds that existed then: their settings are the moved keys (a kind added since keeps its own).
BUILT_IN = {"selection": {"all", "random", "epochs"}, "replay": {"uniform", "prioritized", "tiered"},
            "meta": {"fixed", "rmt"}}  # fmt: skip
SECTIONS = {"selection": SelectionConfig, "replay": ReplayConfig, "meta": MetaConfig, "distributed": DistributedConfig}
PIVOT_KIND = "pivot"  # the top-level ``pivot`` section is ``selection.settings`` of this kind
META_SWITCH = {False: "fixed", True: "rmt"}  # ``meta.enabled`` -> ``meta.kind``
# The gradient reducer: ``distributed.mode`` was its kind (same names), ``distributed.topk`` topk's share.
REDUCERS_THEN = {"topk", "dense"}
TOPK_SHARE = 0.2  # ``distributed.topk``'s default
DENSE_SHARE = 1.0  # what a dense run's hash holds as ``distributed.topk`` (see the module's docstring)
ROLLOUT_SWITCH = {False: "real", True: "latent"}  # ``latent.enabled`` -> ``rollout.kind``


def _reads(section: str, kind: str) -> set[str]:
    """The settings keys of ``kind`` (none for an unknown kind: its own error comes at validation)."""
    try:
        model = SECTIONS[section]._registry().entry(kind).settings
    except ValueError:
        return set()
    return set(model.model_fields) if model is not None else set()


def _merged(base: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """``later`` over ``base``, nested sections merged key by key (``--set pivot.evaluator.x`` keeps the rest)."""
    out = dict(base)
    for key, value in later.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


def _validate_pivot(section: Any) -> None:
    """An unread ``pivot`` section: a bad value is still an error (as it was), named by its old path."""
    try:
        PivotConfig.model_validate(section)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error.get("loc", ()))
        where = f"pivot.{key} = {error.get('input')!r}" if key else "pivot"
        raise ValueError(f"{where}: {str(error.get('msg')).removeprefix('Value error, ')}") from None


def _move_flat(data: dict[str, Any], section: str, notes: list[str]) -> None:
    node = data.get(section)
    moved = [key for key in FLAT_MOVED[section] if isinstance(node, dict) and key in node]
    if not moved:
        return
    node = data[section] = dict(node)
    kind = node.get("kind", DEFAULT_KIND[section])
    reads = _reads(section, kind) if isinstance(kind, str) else set()
    settings = dict(node.get("settings") or {})
    for key in moved:
        value = node.pop(key)
        if key in reads:
            settings[key] = value  # the old key is the later word (a --set on a file written the new way)
    if settings:
        node["settings"] = settings
    taken = [key for key in moved if key in reads]
    if taken:
        notes.append(f"{section}: {', '.join(taken)} moved; write {section}.settings.{{{', '.join(taken)}}} instead")
    dropped = [key for key in moved if key not in reads]
    if dropped:
        notes.append(f"{section}: {', '.join(dropped)} not read by {section}.kind {kind!r}; remove them")


def _move_distributed(data: dict[str, Any], notes: list[str]) -> None:
    """``distributed.mode`` -> ``distributed.kind``; ``distributed.topk`` -> ``distributed.settings.share``."""
    node = data.get("distributed")
    if not isinstance(node, dict) or not {"mode", "topk"} & set(node):
        return
    node = data["distributed"] = dict(node)
    if "mode" in node:
        mode = node.pop("mode")
        if node.get("kind", mode) != mode:  # --set distributed.mode on a file written the new way switches kind
            node.pop("settings", None)
        node["kind"] = mode  # a value that names no reducer is left for validation to name
        notes.append(f"distributed: mode is now kind; write distributed.kind: {mode} instead")
    if "topk" in node:
        share = node.pop("topk")
        kind = node.get("kind", "topk")
        if isinstance(kind, str) and "share" in _reads("distributed", kind):
            node["settings"] = {**(node.get("settings") or {}), "share": share}  # the old key is the later word
            notes.append("distributed: topk moved; write distributed.settings.share instead")
        else:
            notes.append(f"distributed: topk not read by distributed.kind {kind!r}; remove it")


def _move_latent_switch(data: dict[str, Any], notes: list[str]) -> None:
    """``latent.enabled`` -> ``rollout.kind`` (the ``latent`` section stays: the latent source reads it)."""
    latent = data.get("latent")
    if not isinstance(latent, dict) or "enabled" not in latent:
        return
    latent = data["latent"] = dict(latent)
    enabled = latent.pop("enabled")
    kind = ROLLOUT_SWITCH.get(enabled, enabled)  # a non-boolean is left for validation to name
    rollout = data["rollout"] = dict(data.get("rollout") or {})
    if rollout.get("kind", kind) != kind:  # --set latent.enabled on a file written the new way switches the source
        rollout.pop("settings", None)
    rollout["kind"] = kind
    notes.append(f"latent: enabled: {enabled} is now rollout.kind: {kind}; write rollout.kind instead")


def migrate(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with moved keys in their new place (those the chosen kind does not read dropped); the notes."""
    data, notes = dict(data), []
    meta = data.get("meta")
    if isinstance(meta, dict) and "enabled" in meta:
        meta = data["meta"] = dict(meta)
        enabled = meta.pop("enabled")
        kind = META_SWITCH.get(enabled, enabled)  # a non-boolean is left for validation to name
        if meta.get("kind", kind) != kind:  # --set meta.enabled on a file written the new way switches kind
            meta.pop("settings", None)
        meta["kind"] = kind
        notes.append(f"meta: enabled: {enabled} is now kind: {meta['kind']}; write meta.kind instead")
    for section in FLAT_MOVED:
        _move_flat(data, section, notes)
    _move_distributed(data, notes)
    _move_latent_switch(data, notes)
    if "pivot" in data:
        pivot = data.pop("pivot")
        selection = data["selection"] = dict(data.get("selection") or {})
        if selection.get("kind", DEFAULT_KIND["selection"]) == PIVOT_KIND:
            selection["settings"] = _merged(selection.get("settings") or {}, pivot or {})
            notes.append("pivot: moved; write its keys under selection.settings instead (selection.kind: pivot)")
        else:
            _validate_pivot(pivot or {})
            notes.append(f"pivot: not read by selection.kind {selection.get('kind')!r}; remove the section")
    for note in notes:
        log.warning("config: %s", note)
    return data, notes


def _old_search_key(key: str, kinds: dict[str, str]) -> str:
    """A tuning search key in the old layout (``selection.settings.high`` was ``pivot.high``)."""
    section, _, rest = key.partition(".settings.")
    if (section, rest) == ("distributed", "share") and kinds.get("distributed") == "topk":
        return "distributed.topk"
    if not rest or section not in kinds or kinds[section] not in BUILT_IN[section] | {PIVOT_KIND}:
        return key
    return f"pivot.{rest}" if kinds[section] == PIVOT_KIND else f"{section}.{rest}"


def hash_layout(data: dict[str, Any]) -> dict[str, Any]:
    """A dump (``ExperimentConfig.to_dict``) in the layout of before the moves, for the hash."""
    tuning = data.get("tuning")
    if isinstance(tuning, dict):
        kinds = {section: data[section]["kind"] for section in [*FLAT_MOVED, "distributed"]}
        tuning["space"] = {_old_search_key(key, kinds): value for key, value in tuning["space"].items()}
    selection = data["selection"]
    if selection["kind"] == PIVOT_KIND:
        data["pivot"] = selection.pop("settings")
    else:
        data["pivot"] = PivotConfig().model_dump(mode="json")
    for section, defaults in FLAT_MOVED.items():
        node = data[section]
        old = node.pop("settings") if node["kind"] in BUILT_IN[section] else {}
        for key, default in defaults.items():
            node[key] = old.get(key, default)
    meta = data["meta"]
    built_in = {kind: enabled for enabled, kind in META_SWITCH.items()}
    meta["enabled"] = built_in.get(meta["kind"], False)
    if meta["kind"] in built_in:
        del meta["kind"]
    rollout = data.pop("rollout")
    known_source = rollout["kind"] in ROLLOUT_SWITCH.values() and not rollout["settings"]
    data["latent"]["enabled"] = rollout["kind"] == ROLLOUT_SWITCH[True]
    if not known_source:  # a source added since: its section stays in the hash
        data["rollout"] = rollout
    reducer = data["distributed"]
    if reducer["kind"] in REDUCERS_THEN:  # a reducer added since hashes its kind and settings as they are
        settings = reducer.pop("settings")
        reducer["mode"] = reducer.pop("kind")
        reducer["topk"] = settings.get("share", TOPK_SHARE) if reducer["mode"] == "topk" else DENSE_SHARE
    return data
