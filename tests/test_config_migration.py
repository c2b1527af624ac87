"""Keys that moved into a kind's ``settings``: a config written the old way loads, says what to write
instead, and keeps its hash (so its checkpoints resume); the shipped configs use the new keys."""

from __future__ import annotations

import logging

import pytest
import yaml

from frugalrl.config import load_config, validate_config

from .conftest import REPO

OLD_AND_NEW = [
    ({"selection": {"kind": "random", "keep_fraction": 0.5}},
     {"selection": {"kind": "random", "settings": {"keep_fraction": 0.5}}}),
    ({"replay": {"kind": "tiered", "beta": 0.5, "tier_weights": [0.6, 0.3, 0.1]}},
     {"replay": {"kind": "tiered", "settings": {"beta": 0.5, "tier_weights": [0.6, 0.3, 0.1]}}}),
    ({"replay": {"kind": "prioritized", "alpha": 0.7}},
     {"replay": {"kind": "prioritized", "settings": {"alpha": 0.7}}}),
    ({"meta": {"enabled": True, "interval": 5}}, {"meta": {"kind": "rmt", "settings": {"interval": 5}}}),
    ({"meta": {"enabled": False}}, {"meta": {"kind": "fixed"}}),
    ({"selection": {"kind": "pivot"}, "pivot": {"high": 0.9, "evaluator": {"hidden": [8]}}},
     {"selection": {"kind": "pivot", "settings": {"high": 0.9, "evaluator": {"hidden": [8]}}}}),
]  # fmt: skip


def _config(sections):
    algo = "dqn" if {"replay", "meta"} & set(sections) else "ppo"
    return validate_config({"algo": algo, "env": {"id": "CartPole-v1"}, **sections}, "test.yaml")


@pytest.mark.parametrize(("old", "new"), OLD_AND_NEW)
def test_an_old_key_migrates_says_what_to_write_and_keeps_the_hash(old, new, caplog):
    with caplog.at_level(logging.WARNING, logger="frugalrl.config"):
        migrated = _config(old)
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all("instead" in line for line in lines), lines
    assert len(lines) <= 2 * len({line.split(":")[1] for line in lines})  # a line per section and kind of move
    written = _config(new)
    assert migrated.to_dict() == written.to_dict()
    assert migrated.hash() == written.hash()


def test_an_old_key_its_kind_does_not_read_is_dropped_and_the_run_config_gives_the_same_hash(caplog):
    old = _config({"replay": {"kind": "uniform", "alpha": 0.9}, "meta": {"enabled": False, "interval": 3}})
    assert any("not read by replay.kind 'uniform'; remove them" in r.getMessage() for r in caplog.records)
    plain = _config({"replay": {"kind": "uniform"}})
    assert old.to_dict() == plain.to_dict() and old.hash() == plain.hash()  # what config.yaml says, resumes


def test_a_kind_switched_by_set_drops_the_files_settings(tmp_path):
    baseline = load_config(REPO / "configs" / "cartpole-pivot.yaml", ["selection.kind=all"])
    assert baseline.selection.settings == {}
    random = load_config(
        REPO / "configs" / "cartpole-pivot.yaml", ["selection.kind=random", "selection.keep_fraction=0.3"]
    )
    assert random.selection.settings == {"keep_fraction": 0.3}
    uniform = load_config(REPO / "configs" / "lunarlander-rmt.yaml", ["replay.kind=uniform", "meta.enabled=false"])
    assert (uniform.replay.settings, uniform.meta.kind, uniform.meta.settings) == ({}, "fixed", {})


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")) + sorted((REPO / "profiles").glob("*.yaml")))
def test_shipped_files_use_the_new_keys(path, caplog):
    text = path.read_text()
    assert (
        "keep_fraction" not in text
        and "\npivot:" not in text
        and "enabled: true    " not in text.split("meta:")[-1][:40]
    )
    if path.parent.name == "configs":
        with caplog.at_level(logging.WARNING, logger="frugalrl.config"):
            load_config(path)
        assert not caplog.records, [r.getMessage() for r in caplog.records]
    else:
        assert "pivot.evaluator" not in yaml.safe_dump(yaml.safe_load(text))
