"""The config's schema version: a config in another one, or with a key of the layout before versioning
(schema 0), is refused with one line naming its schema and what to write; the hash is of the plain dump."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
import yaml

from frugalrl.cli import main
from frugalrl.config import (
    SCHEMA_VERSION,
    ConfigError,
    apply_overrides,
    config_from_yaml_text,
    load_config,
    policy_view_of_schema_zero,
    schema_zero_problem,
    validate_config,
)

from .conftest import REPO, tiny_config

# One config per family of schema 0 keys, the key the line names and the fix it gives.
SCHEMA_ZERO_CONFIGS = [
    ({"selection": {"kind": "random", "keep_fraction": 0.5}},
     "selection.keep_fraction", "write selection.settings.keep_fraction instead"),
    ({"algo": "dqn", "replay": {"kind": "uniform", "alpha": 0.7}},
     "replay.alpha", "write replay.kind: prioritized and replay.settings.alpha instead"),
    ({"algo": "dqn", "replay": {"kind": "tiered", "tier_weights": [0.6, 0.3, 0.1]}},
     "replay.tier_weights", "write replay.settings.tier_weights instead"),
    ({"algo": "dqn", "meta": {"enabled": True}}, "meta.enabled", "write meta.kind: rmt instead"),
    ({"algo": "dqn", "meta": {"kind": "rmt", "interval": 5}}, "meta.interval", "write meta.settings.interval instead"),
    ({"selection": {"kind": "pivot"}, "pivot": {"high": 0.9}}, "pivot.high", "write selection.settings.high instead"),
    ({"pivot": {"evaluator": {"hidden": [8]}}},
     "pivot.evaluator.hidden", "write selection.kind: pivot and selection.settings.evaluator.hidden instead"),
    ({"distributed": {"workers": 2, "mode": "dense"}}, "distributed.mode", "write distributed.kind: dense instead"),
    ({"distributed": {"topk": 0.05}},
     "distributed.topk", "write distributed.kind: topk and distributed.settings.share instead"),
    ({"latent": {"enabled": False}}, "latent.enabled", "write rollout.kind: real instead"),
    ({"tuning": {"space": {"replay.alpha": {"low": 0.1, "high": 0.9}}}},
     "tuning.space key replay.alpha", "write replay.kind: prioritized and replay.settings.alpha instead"),
]  # fmt: skip


def _validate(sections):
    return validate_config({"env": {"id": "CartPole-v1"}, **sections}, "old.yaml")


@pytest.mark.parametrize(("sections", "key", "fix"), SCHEMA_ZERO_CONFIGS)
def test_a_schema_zero_key_is_refused_with_its_schema_and_what_to_write(sections, key, fix):
    with pytest.raises(ConfigError) as info:
        _validate(sections)
    line = str(info.value)
    assert line.startswith(f"old.yaml: {key} is a key of schema 0 (the layout before versioned configs)"), line
    assert fix in line and "frugalrl config explain, docs/configuration.md" in line and "\n" not in line


def test_an_old_key_beside_its_new_form_is_refused_not_resolved_to_the_old_one():
    text = "algo: dqn\nenv: {id: CartPole-v1}\nmeta: {enabled: true}\n"
    with pytest.raises(ConfigError, match=r"meta\.enabled is a key of schema 0.*write meta\.kind: rmt instead"):
        config_from_yaml_text(text, ["meta.kind=fixed"])
    with pytest.raises(ConfigError, match="and 1 more schema 0 key;"):
        _validate({"algo": "dqn", "replay": {"kind": "tiered", "beta": 0.5, "hot_quantile": 0.8}})


@pytest.mark.parametrize(
    ("version", "says"),
    [(0, "written in schema 0 (the layout before versioned configs), which this frugalrl (schema 1) no longer "
         "reads: rewrite it with schema_version: 1"),
     (99, "written in schema 99, newer than this frugalrl (schema 1): upgrade frugalrl")],
)  # fmt: skip
def test_a_config_stating_another_schema_version_is_refused(version, says):
    with pytest.raises(ConfigError) as info:
        _validate({"schema_version": version})
    assert str(info.value).startswith(f"old.yaml: schema_version = {version}: {says}"), str(info.value)


def test_the_cli_prints_the_schema_line_and_exits_2(tmp_path, capsys):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"env": {"id": "CartPole-v1"}, "latent": {"enabled": True}}))
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "validate", str(path)])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: {path}: latent.enabled is a key of schema 0") and "rollout.kind: latent" in err


def test_every_dump_states_the_schema_and_the_hash_is_of_the_plain_dump():
    config = load_config(REPO / "configs" / "cartpole-ppo.yaml")
    assert SCHEMA_VERSION == 1 and config.schema_version == SCHEMA_VERSION
    assert config.to_dict()["schema_version"] == SCHEMA_VERSION
    assert yaml.safe_load(config.to_yaml())["schema_version"] == SCHEMA_VERSION
    plain = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    assert config.hash() == plain
    stated = load_config(REPO / "configs" / "cartpole-ppo.yaml", [f"schema_version={SCHEMA_VERSION}"])
    assert stated.hash() == config.hash()  # stating the version is the default written out


def _as_schema_zero(today: dict) -> dict:
    """A dump of today as one of before versioning held it: moved keys flat, switches, the top-level pivot."""
    old = {key: value for key, value in today.items() if key not in ("schema_version", "rollout")}
    old["pivot"] = {"high": 0.8}
    old["replay"] = {**old["replay"], "alpha": 0.6, "beta": 0.4}
    old["meta"] = {"enabled": False, "interval": 10}
    old["selection"] = {**old["selection"], "keep_fraction": 0.35}
    old["distributed"] = {**old["distributed"], "mode": "topk", "topk": 0.2}
    old["latent"] = {**old["latent"], "enabled": False}
    return old


def test_a_policy_files_schema_zero_config_is_read_for_evaluation_without_its_old_keys():
    today = load_config(REPO / "configs" / "cartpole-ppo.yaml").to_dict()
    old = _as_schema_zero(today)
    old["tuning"] = {"space": {"pivot.high": {"low": 0.5, "high": 0.9}, "ppo.gamma": {"low": 0.9, "high": 0.99}}}
    assert schema_zero_problem(old) is not None
    view = policy_view_of_schema_zero(old)
    assert schema_zero_problem(view) is None and list(view["tuning"]["space"]) == ["ppo.gamma"]
    read, written = validate_config(view, "policy.pt"), validate_config(today)
    assert (read.env, read.policy, read.ppo, read.rollout.kind) == (written.env, written.policy, written.ppo, "real")
    latent = policy_view_of_schema_zero({"latent": {"enabled": True, "latent_dim": 16}})
    assert latent == {"latent": {"latent_dim": 16}, "rollout": {"kind": "latent"}}  # the encoder stays in front


def test_a_policy_file_of_before_versioning_still_loads_and_acts_alike(tmp_path):
    from frugalrl.policy_store import load_policy_file
    from frugalrl.training import train

    train(tiny_config(), tmp_path / "run", interactive=False)
    blob = torch.load(tmp_path / "run" / "policy.pt", weights_only=True)
    assert blob["config"]["schema_version"] == SCHEMA_VERSION
    torch.save({**blob, "config": _as_schema_zero(blob["config"])}, tmp_path / "old.pt")
    today, _ = load_policy_file(tmp_path / "run" / "policy.pt")
    then, config = load_policy_file(tmp_path / "old.pt")
    obs = torch.randn(8, 4)
    assert torch.equal(today.act(obs), then.act(obs)) and config.env.id == "CartPole-v1"


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")))
def test_shipped_configs_are_in_todays_schema_and_their_config_yaml_gives_their_hash(path):
    assert schema_zero_problem(yaml.safe_load(path.read_text())) is None
    config = load_config(path)
    assert config.schema_version == SCHEMA_VERSION
    # what a run writes as its config.yaml reads back as the same config: its checkpoints resume
    assert validate_config(yaml.safe_load(config.to_yaml()), "config.yaml").hash() == config.hash()


@pytest.mark.parametrize("selection", [{"kind": "random"}, {"kind": "random", "settings": {}}])
def test_settings_left_out_or_empty_read_back_as_the_same_config(selection):
    config = _validate({"selection": selection})
    assert config.selection.settings == {} and validate_config(config.to_dict()).hash() == config.hash()


@pytest.mark.parametrize("path", sorted((REPO / "profiles").glob("*.yaml")))
def test_profile_overrides_are_in_todays_schema(path):
    stages = yaml.safe_load(path.read_text())["stages"]
    overrides = [item for stage in stages.values() if stage for item in stage.get("overrides", [])]
    assert overrides, path  # the test reads what the profiles hold
    assert schema_zero_problem(apply_overrides({}, overrides, str(path))) is None
