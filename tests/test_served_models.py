"""The MLflow model of a policy: code that imports no frugalrl, and Atari screens made grey as ALE makes them."""

from __future__ import annotations

import ast

import numpy as np
import torch

from frugalrl.nets.screens import ScreenPolicy, grey_levels
from frugalrl.tracking.models import SERVED_CODE, screen_input


def test_the_served_models_code_imports_only_what_a_plain_client_has():
    imported = set()
    for node in ast.walk(ast.parse(SERVED_CODE.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"json", "mlflow", "numpy", "torch"}, imported


def test_screens_are_made_grey_exactly_as_ales_grayscale_observation():
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    rgb = gym.make("ALE/Breakout-v5", frameskip=1, obs_type="rgb", repeat_action_probability=0.0)
    grey = gym.make("ALE/Breakout-v5", frameskip=1, obs_type="grayscale", repeat_action_probability=0.0)
    screens, frames = [rgb.reset(seed=3)[0]], [grey.reset(seed=3)[0]]
    for step in range(60):
        action = 1 if step % 9 == 0 else 2 + step % 2  # serve, then move: the ball and paddle are on screen
        screens.append(rgb.step(action)[0])
        frames.append(grey.step(action)[0])
    made = grey_levels(torch.as_tensor(np.stack(screens))).numpy()
    assert len(np.unique(made)) > 3 and np.array_equal(made.astype(np.uint8), np.stack(frames))


def test_a_screen_policy_acts_on_the_stack_it_makes():
    seen = []
    policy = ScreenPolicy(lambda stack: seen.append(stack) or stack.sum(dim=(1, 2, 3)), img_size=84)
    screens = torch.randint(0, 256, (2, 4, 210, 160, 3), dtype=torch.uint8)
    policy(screens)
    assert seen[0].shape == (2, 4, 84, 84) and seen[0].dtype == torch.uint8
    assert torch.equal(seen[0], policy.stack(screens))


def test_an_atari_policy_on_grey_frames_is_served_on_raw_screens_and_others_on_observations():
    stack, size, sentence = screen_input({"id": "ALE/Pong-v5", "atari": {"stack_num": 3, "img_size": 64}})
    assert (stack, size) == (3, 64) and "(n, 3, 210, 160, 3) uint8" in sentence
    assert screen_input({"id": "ALE/Pong-v5", "atari": {"grayscale": False}}) is None  # served as stacked
    assert screen_input({"id": "CartPole-v1"}) is None
