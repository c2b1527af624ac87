"""Does the latent hold the game state? Probes from latents to RAM-annotated positions.

Labels are the AtariARI RAM indices (Anand et al. 2019). A linear probe (ridge regression)
and a small MLP probe map the frozen encoder's latent to each label; a supervised CNN trained
on the same frames gives the ceiling. All figures are held-out R^2 (the later part of every
game is held out, so nearby frames of one episode never sit on both sides).

This, not PSNR, is the encoder's quality figure: an autoencoder can reach 30+ dB while its
latent says nothing about a ball that covers a handful of pixels.

The ceiling depends on the frames, not the encoder, and is most of the probe's time, so it is
computed once per game and frame set (``ceiling_key``) and cached: a JSON file under
``$FRUGALRL_CACHE_DIR`` (default ``~/.cache/frugalrl``) on this machine, and the figures of any
earlier encoder run tagged with the same key in MLflow (a pipeline pod starts with an empty disk).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.envs.registry import ale_game_name
from frugalrl.errors import ConfigError
from frugalrl.latent.dataset import FrameDataset, collect_frames
from frugalrl.latent.encoder import FrameEncoder, encode
from frugalrl.nets.torsos import NatureCNN

PROBE_LABELS: dict[str, dict[str, int]] = {
    "breakout": {"ball_x": 99, "ball_y": 101, "player_x": 72},
    "pong": {"player_y": 51, "enemy_y": 50, "ball_x": 49, "ball_y": 54},
}
PADDLE = {"breakout": "player_x", "pong": "player_y"}


def probe_game(env_id: str) -> str:
    game = ale_game_name(env_id)
    if game not in PROBE_LABELS:
        raise ConfigError(f"no probe labels for {env_id}; probes exist for {', '.join(PROBE_LABELS)}")
    return game


def labelled_frames(data: FrameDataset, game: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Stacked frames, their labels (float) and time index; frames with the ball out of play dropped."""
    names = list(PROBE_LABELS[game])
    games, times = np.meshgrid(np.arange(data.num_games), np.arange(data.steps_per_game), indexing="ij")
    games, times = games.ravel(), times.ravel()
    ram = data.ram[games, times]
    labels = np.stack([ram[:, PROBE_LABELS[game][name]] for name in names], axis=1).astype(np.float32)
    in_play = (labels[:, names.index("ball_x")] > 0) & (labels[:, names.index("ball_y")] > 0)
    games, times, labels = games[in_play], times[in_play], labels[in_play]
    obs = data.stacked(games, times, int(data.meta["stack"]))
    return obs, labels, times, names


def r2_scores(pred: torch.Tensor, target: torch.Tensor) -> list[float]:
    """Coefficient of determination per column."""
    residual = ((pred - target) ** 2).sum(0)
    total = ((target - target.mean(0)) ** 2).sum(0).clamp_min(1e-8)
    return (1 - residual / total).tolist()


def linear_probe(
    z_train: torch.Tensor, y_train: torch.Tensor, z_test: torch.Tensor, ridge: float = 1e-3
) -> torch.Tensor:
    """Ridge regression in closed form (features standardised, bias column unpenalised)."""
    mean, std = z_train.mean(0), z_train.std(0).clamp_min(1e-6)
    a = torch.cat([(z_train - mean) / std, torch.ones(len(z_train), 1)], dim=1).double()
    penalty = ridge * len(a) * torch.eye(a.shape[1], dtype=torch.float64)
    penalty[-1, -1] = 0
    weights = torch.linalg.solve(a.T @ a + penalty, a.T @ y_train.double())
    b = torch.cat([(z_test - mean) / std, torch.ones(len(z_test), 1)], dim=1).double()
    return (b @ weights).float()


def _fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, batch: int, seed: int) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch,), generator=generator)
        loss = ((model(x[idx]) - y[idx]) ** 2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval()


def mlp_probe(
    z_train: torch.Tensor, y_train: torch.Tensor, z_test: torch.Tensor, steps: int, seed: int
) -> torch.Tensor:
    torch.manual_seed(seed)
    mean, std = z_train.mean(0), z_train.std(0).clamp_min(1e-6)
    mlp = nn.Sequential(nn.Linear(z_train.shape[1], 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
    model = nn.Sequential(mlp, nn.Linear(256, y_train.shape[1]))
    _fit(model, (z_train - mean) / std, y_train, steps, 256, seed)
    with torch.no_grad():
        return model((z_test - mean) / std)


def cnn_ceiling(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, steps: int, seed: int
) -> torch.Tensor:
    """A Nature CNN trained end to end on the frames: what the pixels allow."""
    torch.manual_seed(seed)
    model = nn.Sequential(NatureCNN(x_train.shape[1], x_train.shape[-1]), nn.Linear(512, y_train.shape[1]))
    _fit(model, x_train, y_train, steps, 64, seed)
    with torch.no_grad():
        return torch.cat([model(x_test[i : i + 512]) for i in range(0, len(x_test), 512)])


CEILING_VERSION = 1  # bump when cnn_ceiling or the labels change: old cached figures then miss


def ceiling_key(config: ExperimentConfig, steps: int, seed: int, ceiling_steps: int) -> str:
    """What the CNN ceiling depends on: the probe frames (env, preprocessing, steps, seed) and its fit."""
    ident = {
        "version": CEILING_VERSION,
        "env": config.env.model_dump(mode="json"),
        "collect_envs": config.latent.collect_envs,
        "steps": steps,
        "seed": seed,
        "ceiling_steps": ceiling_steps,
        "labels": PROBE_LABELS[probe_game(config.env.id)],
        "torch": torch.__version__.split("+")[0],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _cache_file(key: str) -> Path:
    root = os.environ.get("FRUGALRL_CACHE_DIR") or Path.home() / ".cache" / "frugalrl"
    return Path(root) / "probe-ceiling" / f"{key}.json"


def _cached_ceiling(key: str, lookup: Callable[[str], dict[str, float] | None] | None) -> dict[str, float] | None:
    path = _cache_file(key)
    try:
        figures = json.loads(path.read_text())
        if isinstance(figures, dict) and figures and all(isinstance(v, float) for v in figures.values()):
            return figures
    except (OSError, ValueError):
        pass  # absent or unreadable: computed again (and rewritten) below
    figures = lookup(key) if lookup is not None else None
    if figures:
        _store_ceiling(key, figures)
    return figures


def _store_ceiling(key: str, figures: dict[str, float]) -> None:
    try:
        path = _cache_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps(figures, sort_keys=True).encode())
    except OSError:
        pass  # a read-only home only costs the next run the same minute


def probe_latent(
    encoder: FrameEncoder,
    config: ExperimentConfig,
    steps: int = 8000,
    seed: int = 777,
    probe_steps: int = 3000,
    ceiling_steps: int = 1500,
    data: FrameDataset | None = None,
    ceiling_lookup: Callable[[str], dict[str, float] | None] | None = None,
) -> dict[str, Any]:
    """Held-out R^2 per label: linear and MLP probes on the latent, and the CNN ceiling.

    ``data`` defaults to ``steps`` fresh random-play frames under ``seed`` (not the encoder's
    training data). Returns per-label figures plus the summary ``ball_r2_mlp`` (mean of ball
    x and y), ``paddle_r2_mlp`` and ``ball_ceiling_r2``; ``ceiling_steps=0`` skips the CNN.
    The ceiling comes from the cache when ``data`` is the default frame set (``ceiling_cached``
    says which); ``ceiling_lookup`` finds it elsewhere (MLflow) when this machine has none.
    """
    game = probe_game(config.env.id)
    key = ceiling_key(config, steps, seed, ceiling_steps) if data is None and ceiling_steps > 0 else None
    if data is None:
        collect_config = config.model_copy(update={"latent": config.latent.model_copy(update={"behaviour": "random"})})
        data = collect_frames(collect_config, steps=steps, seed=seed)
    obs, labels, times, names = labelled_frames(data, game)
    if len(obs) < 50:
        raise ConfigError(f"only {len(obs)} probe frames have the ball in play; raise the probe's steps")
    cut = np.quantile(times, 0.8)
    train, test = times <= cut, times > cut
    y = torch.as_tensor(labels)
    y_mean, y_std = y[train].mean(0), y[train].std(0).clamp_min(1e-6)
    y = (y - y_mean) / y_std
    x = torch.as_tensor(obs)
    encoder.eval()
    z = encode(encoder, x)
    results: dict[str, Any] = {"game": game, "probe_frames": int(len(obs)), "heldout_frames": int(test.sum())}
    preds = {
        "linear": linear_probe(z[train], y[train], z[test]),
        "mlp": mlp_probe(z[train], y[train], z[test], probe_steps, seed),
    }
    cached = _cached_ceiling(key, ceiling_lookup) if key is not None else None
    if ceiling_steps > 0 and cached is None:
        preds["cnn"] = cnn_ceiling(x[train], y[train], x[test], ceiling_steps, seed)
    for kind, pred in preds.items():
        for name, score in zip(names, r2_scores(pred, y[test]), strict=True):
            results[f"r2_{kind}_{name}"] = round(score, 4)
    if key is not None:
        if cached is None:
            _store_ceiling(key, {f"r2_cnn_{name}": results[f"r2_cnn_{name}"] for name in names})
        results.update(cached or {})
        results["ceiling_key"], results["ceiling_cached"] = key, cached is not None
    results["ball_r2_mlp"] = round((results["r2_mlp_ball_x"] + results["r2_mlp_ball_y"]) / 2, 4)
    results["ball_r2_linear"] = round((results["r2_linear_ball_x"] + results["r2_linear_ball_y"]) / 2, 4)
    results["paddle_r2_mlp"] = results[f"r2_mlp_{PADDLE[game]}"]
    if "r2_cnn_ball_x" in results:  # computed here or cached
        results["ball_ceiling_r2"] = round((results["r2_cnn_ball_x"] + results["r2_cnn_ball_y"]) / 2, 4)
        results["paddle_ceiling_r2"] = results[f"r2_cnn_{PADDLE[game]}"]
    return results
