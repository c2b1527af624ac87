"""The encoder and world model a latent-curriculum run starts from, and its bank of real start latents.

Three ways in: ``latent.encoder_from`` names models trained on this game (loaded as they are, the
game's world-model head picked), or on other games or to be fine-tuned (the encoder adapted, a world
model fitted on this game's frames: ``_transfer``); without it both are pretrained in the run
(``frugalrl.latent.pretrain``). What making them cost enters the run's meter as pretraining.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.errors import ConfigError
from frugalrl.latent.dataset import collect_frames
from frugalrl.latent.encoder import encode
from frugalrl.latent.pretrain import train_latent_models
from frugalrl.latent.store import LatentModels, load_latent, save_latent
from frugalrl.latent.world_model import LatentWorldModel
from frugalrl.latent.world_model_fit import TransitionSampler, fit_world_model, heldout_metrics


def prepare_models(config: ExperimentConfig, meter: CostMeter, out: Path) -> tuple[LatentModels, torch.Tensor, str]:
    """The encoder and world model (loaded, or pretrained here), and a bank of real start latents."""
    latent = config.latent
    atari = config.env.atari
    if latent.encoder_from:
        models = load_latent(latent.encoder_from)
        spec = models.encoder.spec()
        wanted = {"in_channels": atari.stack_num, "frame_size": atari.img_size, "latent_dim": latent.latent_dim}
        if spec != wanted:
            raise ConfigError(
                f"latent.encoder_from {latent.encoder_from}: encoder has {spec}, the config asks for {wanted}; "
                "set latent.latent_dim / env.atari to match it"
            )
        # Made once, for many runs (a registered encoder): listed by name as a shared cost (None: saved
        # before costs were kept), apart from what this run alone costs (``per_run_flops``).
        meter.add_pretrained(f"encoder {latent.encoder_from}", models.metadata.get("pretrain_flops"), shared=True)
        if config.env.id in models.games and latent.encoder_mode == "frozen":
            models.for_game(config.env.id)
            data = collect_frames(config, steps=min(latent.collect_steps, 2048))  # start latents only
            note = f"encoder and world model from {latent.encoder_from} ({config.env.id}'s head)"
        else:
            models, data, note = _transfer(models, config, meter, out)
    else:
        data = collect_frames(config)
        models, metrics = train_latent_models(config, data, meter)
        models.metadata.update(env_id=config.env.id, objective=latent.objective, pretrain_flops=meter.pretrain_flops)
        save_latent(out / "encoder.pt", models)
        atomic_write_bytes(out / "encoder_metrics.json", (json.dumps(metrics, indent=2) + "\n").encode())
        note = f"encoder pretrained in this run (psnr {metrics['psnr_db']} dB)"
    for module in (models.encoder, models.decoder):
        module.eval().requires_grad_(False)
    games, times = np.meshgrid(np.arange(data.num_games), np.arange(data.steps_per_game), indexing="ij")
    frames = torch.as_tensor(data.stacked(games.ravel(), times.ravel(), int(data.meta["stack"])))
    with torch.no_grad():
        bank = meter.run_counted("encode_start", lambda: encode(models.encoder, frames), len(frames))
    meter.count("encode_start", len(frames))  # the virtual env's start latents: real frames, encoded
    return models, bank, note


def _transfer(
    models: LatentModels, config: ExperimentConfig, meter: CostMeter, out: Path
) -> tuple[LatentModels, Any, str]:
    """A pretrained encoder on a game it never saw (or to fine-tune): adapt it, learn this game's world model.

    The world model never transfers across games (other actions, other dynamics): a game the
    encoder was trained on keeps its head, any other gets a new one fitted on frames of this game.
    ``encoder_mode: finetune`` first trains the encoder on them. The saved ``encoder.pt`` holds
    this game's head only.
    """
    latent = config.latent
    data = collect_frames(config)
    num_actions = int(data.meta["num_actions"])
    source_games = models.games
    if config.env.id in source_games:
        models.for_game(config.env.id)
    if config.env.id not in source_games or models.world_model.num_actions != num_actions:
        models.world_model = LatentWorldModel(latent.latent_dim, num_actions, latent.world_model.hidden)
    models.heads = {}
    if latent.encoder_mode == "finetune":
        models, _ = train_latent_models(config, data, meter, start=models)
    train_steps, test_steps = data.split(latent.holdout_fraction)
    sampler = TransitionSampler(data, train_steps, config.seed)
    steps = max(1, latent.world_model.epochs * len(sampler) // (latent.batch_size * 4))
    fit_world_model(models, sampler, config, meter, steps)
    metrics = heldout_metrics(models, data, test_steps, config)
    models.metadata = {**models.metadata, "env_id": config.env.id, "games": [config.env.id],
                       "transferred_from": source_games, "pretrain_flops": meter.pretrain_flops}  # fmt: skip
    save_latent(out / "encoder.pt", models)
    atomic_write_bytes(out / "encoder_metrics.json", (json.dumps(metrics, indent=2) + "\n").encode())
    return (
        models,
        data,
        (
            f"encoder from {latent.encoder_from} ({', '.join(source_games)}, {latent.encoder_mode}); "
            f"world model fitted on {config.env.id} (held-out PSNR {metrics['psnr_db']} dB)"
        ),
    )
