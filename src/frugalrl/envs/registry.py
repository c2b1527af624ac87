"""Which environment ids exist, with the ALE games registered."""

from __future__ import annotations

import functools
import re

import gymnasium as gym

EXAMPLE_IDS = ("CartPole-v1", "LunarLander-v3", "BipedalWalker-v3", "HalfCheetah-v5", "Hopper-v5", "ALE/Breakout-v5")


@functools.cache
def _register_ale() -> bool:
    try:
        import ale_py
    except ImportError:  # pragma: no cover - ale-py is a dependency
        return False
    gym.register_envs(ale_py)
    return True


def validate_env_id(env_id: str) -> bool:
    """True when gymnasium (with the ALE games registered) knows ``env_id``."""
    if env_id.startswith("ALE/"):
        _register_ale()
    try:
        gym.spec(env_id)
    except gym.error.Error:
        return False
    return True


def known_env_ids() -> str:
    return "a gymnasium id such as " + ", ".join(EXAMPLE_IDS)


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def ale_game_name(env_id: str) -> str:
    """``ALE/SpaceInvaders-v5`` -> ``space_invaders`` (the ROM name ale-py uses)."""
    _register_ale()
    game = gym.spec(env_id).kwargs.get("game")
    if game:
        return str(game)
    stem = env_id.removeprefix("ALE/").split("-v")[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()
