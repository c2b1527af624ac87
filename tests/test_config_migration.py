"""Keys that moved into a kind's ``settings``: a config written the old way loads, says what to write
instead, and keeps its hash (so its checkpoints resume); the shipped configs use the new keys."""

from __future__ import annotations

import logging

import pytest
import yaml

from frugalrl.config import config_from_yaml_text, load_config, validate_config

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
    ({"distributed": {"workers": 2, "mode": "topk", "topk": 0.05}},
     {"distributed": {"workers": 2, "kind": "topk", "settings": {"share": 0.05}}}),
    ({"distributed": {"topk": 0.5}}, {"distributed": {"settings": {"share": 0.5}}}),
    ({"distributed": {"workers": 2, "mode": "dense"}}, {"distributed": {"workers": 2, "kind": "dense"}}),
    ({"latent": {"enabled": True, "latent_dim": 16}}, {"rollout": {"kind": "latent"}, "latent": {"latent_dim": 16}}),
    ({"latent": {"enabled": False}}, {"rollout": {"kind": "real"}}),
]  # fmt: skip

# Hashes computed before the gradient reducer seam (distributed.mode / distributed.topk), on these configs
# (CartPole-v1, the rest at its defaults): the old keys and the new keep them, so their checkpoints resume.
# benchmarks/fusion.py's dense contender set distributed.topk=1.0, which dense never read: its hash is kept.
REDUCER_HASHES = [
    ({}, {}, "33528bcddd7d6a80"),
    ({"workers": 2, "mode": "topk", "topk": 0.2}, {"workers": 2}, "79f4f1e4c4cd79d6"),
    ({"workers": 2, "mode": "topk", "topk": 0.05}, {"workers": 2, "settings": {"share": 0.05}}, "bb3d7655dea140b9"),
    ({"workers": 2, "topk": 0.01}, {"workers": 2, "kind": "topk", "settings": {"share": 0.01}}, "6346f2e45c386a91"),
    ({"workers": 2, "mode": "dense", "topk": 1.0}, {"workers": 2, "kind": "dense"}, "5b22d67b745a6398"),
    ({"workers": 2, "mode": "dense", "topk": 1.0, "beta": 0.5, "value_dtype": "float32"},
     {"workers": 2, "kind": "dense", "beta": 0.5, "value_dtype": "float32"}, "ecf62ef1ffd76ac0"),
]  # fmt: skip


def _config(sections):
    algo = "dqn" if {"replay", "meta"} & set(sections) else "ppo"
    env = "ALE/Breakout-v5" if {"latent", "rollout"} & set(sections) else "CartPole-v1"
    return validate_config({"algo": algo, "env": {"id": env}, **sections}, "test.yaml")


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


# Hashes computed before the rollout source seam (latent.enabled), the old key and the new.
ROLLOUT_HASHES = [
    ({"env": {"id": "CartPole-v1"}, "latent": {"enabled": False}}, {"env": {"id": "CartPole-v1"}}, "33528bcddd7d6a80"),
    ({"env": {"id": "ALE/Breakout-v5"}, "latent": {"enabled": True}},
     {"env": {"id": "ALE/Breakout-v5"}, "rollout": {"kind": "latent"}}, "07547d2579edc2ca"),
    ({"env": {"id": "ALE/Breakout-v5"},
      "latent": {"enabled": True, "latent_dim": 16, "curriculum": {"mode": "adaptive", "target_score": 20.0}}},
     {"env": {"id": "ALE/Breakout-v5"}, "rollout": {"kind": "latent"},
      "latent": {"latent_dim": 16, "curriculum": {"mode": "adaptive", "target_score": 20.0}}}, "0827b2bd65b5b852"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "before"), ROLLOUT_HASHES)
def test_the_rollout_keys_old_and_new_keep_the_hash_of_before_the_seam(old, new, before):
    configs = [validate_config(data, "t.yaml") for data in (old, new)]
    assert [config.hash() for config in configs] == [before, before]
    assert validate_config(configs[0].to_dict(), "config.yaml").hash() == before


@pytest.mark.parametrize(("old", "new", "before"), REDUCER_HASHES)
def test_the_reducer_keys_old_and_new_keep_the_hash_of_before_the_seam(old, new, before):
    configs = [
        validate_config({"env": {"id": "CartPole-v1"}, "distributed": section}, "t.yaml") for section in (old, new)
    ]
    assert [config.hash() for config in configs] == [before, before]
    # what a run writes as its config.yaml (new keys, every default filled in) gives the hash its checkpoints hold
    assert validate_config(configs[0].to_dict(), "config.yaml").hash() == before


def test_a_dense_run_that_set_a_share_drops_it_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="frugalrl.config"):
        old = _config({"distributed": {"workers": 2, "mode": "dense", "topk": 0.5}})
    assert any("topk not read by distributed.kind 'dense'; remove it" in r.getMessage() for r in caplog.records)
    assert old.to_dict() == _config({"distributed": {"workers": 2, "kind": "dense"}}).to_dict()
    assert old.distributed.settings == {} and old.hash() == REDUCER_HASHES[4][2]  # dense's hash counts share 1.0


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")))
def test_a_shipped_config_with_its_reducer_and_rollout_source_written_the_old_way_keeps_its_hash(path):
    config = load_config(path)
    old = config.to_dict()
    reducer = old["distributed"]
    share = config.distributed.built_settings().share
    old["distributed"] = {**{k: v for k, v in reducer.items() if k not in ("kind", "settings")},
                          "mode": reducer["kind"], "topk": share}  # fmt: skip
    old["latent"]["enabled"] = old.pop("rollout")["kind"] == "latent"
    assert validate_config(old, "old.yaml").hash() == config.hash()


def test_a_reducer_switched_by_set_drops_the_files_settings():
    text = "env: {id: CartPole-v1}\ndistributed: {workers: 2, kind: topk, settings: {share: 0.05}}\n"
    dense = config_from_yaml_text(text, ["distributed.kind=dense"])
    assert (dense.distributed.kind, dense.distributed.settings) == ("dense", {})
    old_word = config_from_yaml_text(text, ["distributed.mode=dense"])  # an old --set on a file written the new way
    assert old_word.to_dict() == dense.to_dict()
    share = config_from_yaml_text(text, ["distributed.topk=0.3"])
    assert share.distributed.settings == {"share": 0.3}


def test_the_latent_switch_set_on_a_file_written_the_new_way_picks_the_source():
    path = REPO / "configs" / "breakout-latent.yaml"
    assert load_config(path).rollout.kind == "latent"
    assert load_config(path, ["latent.enabled=false"]).to_dict() == load_config(path, ["rollout.kind=real"]).to_dict()


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
