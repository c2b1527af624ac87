"""A logged policy is a plain MLflow model: it loads and plays where frugalrl cannot be imported.

The subprocess blocks every ``import frugalrl``, loads the model with ``mlflow.pyfunc`` and
plays episode i from seed ``10000 + i`` with plain gymnasium; its returns must equal frugalrl's
own evaluation on the same seeds (same deterministic actions, same initial states).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from frugalrl.config import EnvConfig
from frugalrl.evaluation import evaluate_policy
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.policy_store import load_policy
from frugalrl.train import train

from .conftest import tiny_config
from .test_sac import sac_config

PLAY = """
import json, sys
sys.modules["frugalrl"] = None  # a Python without frugalrl: any import of it fails
import gymnasium as gym, mlflow, numpy as np

uri, env_id, episodes = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = mlflow.pyfunc.load_model(uri)
returns = []
for i in range(episodes):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=10_000 + i)
    total, done = 0.0, False
    while not done:
        action = np.asarray(model.predict(obs[None].astype(np.float32)))[0]
        if isinstance(env.action_space, gym.spaces.Discrete):
            action = int(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, done = total + float(reward), terminated or truncated
    returns.append(total)
print(json.dumps({"returns": returns, "inputs": str(model.metadata.signature.inputs)}))
"""


@pytest.mark.parametrize(
    "config",
    [
        tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 4096}),
        sac_config(tracking={"enabled": True}, env={"normalize_obs": False}),
    ],
    ids=["ppo-cartpole", "sac-pendulum"],
)
def test_a_logged_policy_loads_and_plays_without_frugalrl(config, tmp_path):
    summary = train(config, tmp_path / "run", interactive=False)
    uri = summary["model_uri"]
    ours = evaluate_policy(load_policy(uri), EnvConfig(id=config.env.id), episodes=3, seed=10_000).returns
    proc = subprocess.run(
        [sys.executable, "-c", PLAY, uri, config.env.id, "3"],
        capture_output=True, text=True, env={**os.environ}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(proc.stdout.strip().splitlines()[-1])
    assert played["returns"] == pytest.approx(ours, rel=1e-5)
    assert "float32" in played["inputs"]  # the model carries a signature


def test_frugalrl_loads_a_logged_policy_with_its_own_classes(tmp_path):
    from frugalrl.nets.policy import ActorCritic

    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    policy = load_policy(summary["model_uri"])
    assert type(policy) is ExportedPolicy and type(policy.actor_critic) is ActorCritic
