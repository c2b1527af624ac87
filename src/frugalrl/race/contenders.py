"""The contenders of a race: what each changes in the race's config, and whether it fits the config's learner.

A contender is named three ways on the command line:

- a built-in technique (``BUILTIN``): ``plain`` (the config with its technique seams at their plain kinds:
  every sample gets compute, uniform replay, fixed hyperparameters), ``random-skip`` and ``fewer-epochs``
  (PivotRL's equal-compute controls), ``pivot`` (key-state skipping), ``prioritized`` and ``tiered`` replay;
- ``LABEL=FILE.yaml``: another config of the same env (e.g. a latent policy against pixel PPO);
- ``LABEL:KEY=VALUE;KEY=VALUE``: the race's config with these overrides (a named variant).

The first contender is the control the others are judged against (put ``plain`` first). A built-in that does
not fit the learner (replay on PPO, a sample selector on SAC) is refused in one line before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from frugalrl.config import ExperimentConfig, load_config
from frugalrl.errors import ConfigError

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class Contender:
    """One contender: the config file it trains and the overrides it adds (after the race's ``--set``)."""

    name: str
    config: Path
    overrides: tuple[str, ...]
    description: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "config": str(self.config), "overrides": list(self.overrides),
                "description": self.description}  # fmt: skip


@dataclass(frozen=True)
class Builtin:
    description: str
    learners: tuple[str, ...]  # the config's ``algo`` values it fits
    overrides: Callable[[ExperimentConfig], list[str]]


def _kind(section: str, kind: str) -> Callable[[ExperimentConfig], list[str]]:
    """Set ``section.kind``; the config's own settings stay when it already runs that kind, else the kind's
    defaults (another kind's settings would be refused by this one's model)."""

    def overrides(config: ExperimentConfig) -> list[str]:
        if getattr(config, section).kind == kind:
            return []
        return [f"{section}.kind={kind}", f"{section}.settings={{}}"]

    return overrides


def _plain(config: ExperimentConfig) -> list[str]:
    seam = _kind("selection", "all") if config.algo == "ppo" else _kind("replay", "uniform")
    return [*seam(config), *_kind("meta", "fixed")(config)]


BUILTIN: dict[str, Builtin] = {
    "plain": Builtin("the config's learner with no technique: PPO updates on every sample, DQN and SAC replay "
                     "uniformly, hyperparameters fixed",
                     ("ppo", "dqn", "sac"), _plain),
    "random-skip": Builtin("PPO updating on a random share of each rollout (selection.kind random)",
                           ("ppo",), _kind("selection", "random")),
    "fewer-epochs": Builtin("PPO with fewer passes over each rollout (selection.kind epochs)",
                            ("ppo",), _kind("selection", "epochs")),
    "pivot": Builtin("PPO skipping the samples its importance evaluator scores low (selection.kind pivot)",
                     ("ppo",), _kind("selection", "pivot")),
    "prioritized": Builtin("prioritised replay (replay.kind prioritized)", ("dqn", "sac"),
                           _kind("replay", "prioritized")),
    "tiered": Builtin("tiered replay (replay.kind tiered)", ("dqn", "sac"), _kind("replay", "tiered")),
}  # fmt: skip

FORMS = f"a built-in ({', '.join(BUILTIN)}), LABEL=CONFIG.yaml or LABEL:KEY=VALUE[;KEY=VALUE]"


def _load(path: Path, overrides: Sequence[str]) -> ExperimentConfig:
    return load_config(path, list(overrides))


def parse_contenders(specs: Sequence[str], config: Path, sets: Sequence[str] = ()) -> list[Contender]:
    """The contenders ``specs`` name, each checked against the race's ``config`` (with the user's ``sets``):
    its config must load, fit and train the race's env. Raises ``ConfigError`` (one line) otherwise."""
    if len(specs) < 2:
        raise ConfigError(f"a race needs two contenders or more, the control first (e.g. plain random-skip); "
                          f"got {len(specs)}")  # fmt: skip
    base = _load(config, sets)
    contenders = [_one(spec, config, base) for spec in specs]
    names = [c.name for c in contenders]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"contender {twice[0]} is named twice; give each a label of its own (LABEL:KEY=VALUE)")
    for contender in contenders:
        cfg = _load(contender.config, [*sets, *contender.overrides])
        if cfg.env.id != base.env.id:
            raise ConfigError(f"contender {contender.name} trains {cfg.env.id} and the race's config {base.env.id}; "
                              "a race compares contenders on one task")  # fmt: skip
        if cfg.distributed.workers > 1:
            raise ConfigError(f"contender {contender.name} trains on {cfg.distributed.workers} workers; a race "
                              "measures one process per run: set distributed.workers=1")  # fmt: skip
    return contenders


def _one(spec: str, config: Path, base: ExperimentConfig) -> Contender:
    if spec in BUILTIN:
        builtin = BUILTIN[spec]
        if base.algo not in builtin.learners:
            fitting = ", ".join(n for n, b in BUILTIN.items() if base.algo in b.learners)
            raise ConfigError(f"contender {spec} does not fit this config's learner ({base.algo}); it fits "
                              f"{', '.join(builtin.learners)}. For {base.algo}: {fitting}, or a variant "
                              "LABEL:KEY=VALUE")  # fmt: skip
        return Contender(spec, config, tuple(builtin.overrides(base)), builtin.description)
    label, eq, path = spec.partition("=")
    if eq and ":" not in label and path.endswith((".yaml", ".yml")):
        _label_ok(label, spec)
        if not Path(path).is_file():
            raise ConfigError(f"contender {label}: config {path} does not exist; give a YAML file's path")
        return Contender(label, Path(path), (), f"the config {path}")
    label, colon, sets = spec.partition(":")
    if colon and sets:
        _label_ok(label, spec)
        overrides = tuple(s.strip() for s in sets.split(";") if s.strip())
        bad = [s for s in overrides if "=" not in s]
        if bad or not overrides:
            raise ConfigError(f"contender {spec}: {bad[0] if bad else 'nothing'} is not KEY=VALUE; "
                              "write LABEL:KEY=VALUE[;KEY=VALUE]")  # fmt: skip
        return Contender(label, config, overrides, "the race's config with " + "; ".join(overrides))
    raise ConfigError(f"unknown contender {spec!r}: give {FORMS}")


def _label_ok(label: str, spec: str) -> None:
    if label in BUILTIN or not LABEL.match(label):
        raise ConfigError(f"contender {spec}: label {label!r} must be letters, digits, '_', '.', '-' (up to 40) and "
                          f"not a built-in's name ({', '.join(BUILTIN)})")  # fmt: skip
