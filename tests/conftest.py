"""Shared fixtures: a private MLflow sqlite store per test, tiny configs, NaN-reward env."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from frugalrl.config import ExperimentConfig, validate_config

REPO = Path(__file__).resolve().parents[1]


class NaNRewardEnv(gym.Env):
    """A tiny env whose reward turns NaN after a few steps: drives the divergence guard."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, nan_after: int = 40):
        self.nan_after = nan_after
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float("nan") if self.t > self.nan_after else 1.0
        return np.zeros(2, np.float32), reward, False, self.t % 20 == 0, {}


gym.register("FrugalTest/NaNReward-v0", entry_point=NaNRewardEnv)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Each test gets its own MLflow store and working directory; one torch thread."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    torch.set_num_threads(1)


def tiny_config(**sections) -> ExperimentConfig:
    """CartPole with a budget of a few updates; ``sections`` override top-level keys."""
    data = {
        "name": "tiny",
        "seed": 3,
        "env": {"id": "CartPole-v1", "num_envs": 4},
        "ppo": {"total_timesteps": 1024, "num_steps": 32, "batch_size": 64, "update_epochs": 2},
        "eval": {"episodes": 4},
        "checkpoint": {"every_updates": 2},
        "tracking": {"enabled": False},
    }
    if sections.get("algo", "ppo") != "ppo" and "ppo" not in sections:
        del data["ppo"]  # another algorithm's settings would be refused as ignored
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return validate_config(data, source="tiny")


IN_CI = bool(os.environ.get("FRUGALRL_CI"))  # set by .ci/run: there a test that needs a service must not skip


def postgres_up() -> bool:
    return (
        shutil.which("pg_isready") is not None
        and subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0
    )


# A Postgres-backed test: skipped with the reason on a machine without PostgreSQL, never in CI
# (there it runs and fails, loudly, if PostgreSQL is down).
needs_postgres = pytest.mark.skipif(
    not IN_CI and not postgres_up(), reason="PostgreSQL is not running on 127.0.0.1 (in CI this test fails instead)"
)
