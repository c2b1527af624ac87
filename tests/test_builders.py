"""The policy builder registry: a saved policy rebuilds from its config; PEFT plugs in its adapter."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import CheckpointError
from frugalrl.nets import builders
from frugalrl.nets.builders import build_policy, policy_kinds, register_builder
from frugalrl.nets.policy import ActorCritic, ExportedPolicy
from frugalrl.policy_store import load_policy_file, save_policy

from .conftest import REPO, tiny_config


def _spaces(config):
    env = make_vec_env(config.env, num_envs=1, training=False)
    spaces = env.single_observation_space, env.single_action_space
    env.close()
    return spaces


def test_saved_policy_round_trips_through_the_registry(tmp_path, monkeypatch):
    config = tiny_config()
    assert policy_kinds(config) == ["ppo"]
    parts = build_policy(config, *_spaces(config))
    assert isinstance(parts.network, ActorCritic) and parts.encoder is None
    policy = ExportedPolicy(parts.network, spec={"env": config.env.model_dump(mode="json")}).eval()
    save_policy(tmp_path / "policy.pt", policy, config)

    built = []
    original = builders._BUILDERS["ppo"]
    monkeypatch.setitem(builders._BUILDERS, "ppo", original)  # the built-in comes back after the test
    register_builder("ppo", lambda p: (built.append(p.config.algo), original(p)))
    loaded, loaded_config = load_policy_file(tmp_path)
    assert built == ["ppo"] and loaded_config.hash() == config.hash()
    obs = torch.randn(6, 4)
    torch.testing.assert_close(loaded(obs), policy(obs))
    for key, value in policy.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value)


def test_a_kind_without_builder_is_a_clear_error(monkeypatch):
    config = tiny_config(algo="dqn", dqn={"total_timesteps": 1000})
    monkeypatch.delitem(builders._BUILDERS, "dqn")
    with pytest.raises(CheckpointError, match="no builder for policy kind 'dqn'"):
        build_policy(config, *_spaces(config))


def test_policy_store_does_not_import_peft():
    code = (
        "import sys, frugalrl.policy_store, frugalrl.nets.builders as b\n"
        "assert not [m for m in sys.modules if m.startswith('frugalrl.peft')], 'peft imported'\n"
        "assert 'adapter' not in b._BUILDERS\n"
        "import frugalrl.peft.store\n"
        "assert 'adapter' in b._BUILDERS\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)
