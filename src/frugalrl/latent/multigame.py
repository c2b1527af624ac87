"""Frames of several games for one shared encoder: collected per game, hashed together.

A shared encoder (``frugalrl pretrain encoder --games A B ...``) trains on random-play frames of
every game; each game keeps its own dataset file (its own actions and RAM layout), and the
encoder's lineage hash covers all of them, each under its game id, so changing any frame of any
game, or the set of games, changes it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from frugalrl.config import ExperimentConfig, validate_config
from frugalrl.envs.registry import ale_game_name, is_atari
from frugalrl.errors import ConfigError
from frugalrl.latent.dataset import FrameDataset, collect_frames


def check_games(games: list[str]) -> list[str]:
    """The games as given, each an ALE id and none twice (one clear line otherwise)."""
    not_atari = [g for g in games if not is_atari(g)]
    if not_atari:
        raise ConfigError(f"--games {' '.join(not_atari)}: a frame encoder reads Atari screens; use ALE/ ids")
    for game in games:
        try:
            ale_game_name(game)
        except Exception:  # gymnasium's NameNotFound / VersionNotFound / a ROM ale-py lacks
            raise ConfigError(f"--games {game}: no such ALE game; use an id like ALE/Breakout-v5") from None
    if len(set(games)) != len(games):
        raise ConfigError(f"--games {' '.join(games)}: a game is listed twice; list each once")
    return list(games)


def game_config(config: ExperimentConfig, game: str) -> ExperimentConfig:
    """``config`` with ``env.id`` set to ``game`` (preprocessing and latent settings unchanged)."""
    data = config.to_dict()
    return validate_config({**data, "env": {**data["env"], "id": game}}, f"env.id={game}")


def collect_games(config: ExperimentConfig, games: list[str]) -> dict[str, FrameDataset]:
    """``latent.collect_steps`` frames of every game, in the order given."""
    return {game: collect_frames(game_config(config, game)) for game in games}


def dataset_file(out: Path, game: str) -> Path:
    return Path(out) / f"dataset-{ale_game_name(game)}.npz"


def save_games(datasets: dict[str, FrameDataset], out: Path) -> str:
    """Write one file per game; returns the hash over all of them (``games_hash``)."""
    for game, data in datasets.items():
        data.save(dataset_file(out, game))
    return games_hash(datasets)


def games_hash(datasets: dict[str, FrameDataset]) -> str:
    """sha256 over (game id, that game's content hash) in the given order; one game: its own hash."""
    if len(datasets) == 1:
        return next(iter(datasets.values())).content_hash()
    digest = hashlib.sha256()
    for game, data in datasets.items():
        digest.update(f"{game}:{data.content_hash()}\n".encode())
    return digest.hexdigest()
