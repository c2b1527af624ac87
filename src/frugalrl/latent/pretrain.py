"""Encoder and world-model pretraining on a frame dataset, with held-out quality figures.

Three encoder objectives (``latent.objective``), chosen by measurement (docs/latent.md):

- ``recon``: plain pixel reconstruction of the frame stack. Reaches a high PSNR while the
  latent may ignore the ball: static bricks dominate the pixel loss.
- ``motion``: reconstruction weighted ``1 + motion_weight`` on pixels that change within the
  stack (ball, paddle), so the few pixels that matter for play carry weight.
- ``dynamics``: ``motion`` plus the world model trained jointly (as Dreamer does): the latent
  must predict the next latent, the reward class and termination under the action taken,
  and the decoded *predicted* next latent must reconstruct the next frames.

With ``recon`` or ``motion`` the world model is fitted afterwards on the frozen encoder's
latents; that fit and the held-out figures (PSNR, latent prediction error, reward and
termination accuracy) are ``frugalrl.latent.world_model_fit``. ``pretrain_encoder`` is the
command around it all: collect, train, probe, save, log and register.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.registry import ale_game_name
from frugalrl.errors import ConfigError, TrackingError
from frugalrl.latent.dataset import FrameDataset, collect_frames, load_dataset
from frugalrl.latent.encoder import FrameDecoder, FrameEncoder, motion_mask
from frugalrl.latent.multigame import check_games, collect_games, game_config, save_games
from frugalrl.latent.probe import PROBE_LABELS, probe_latent
from frugalrl.latent.store import LatentModels, save_latent
from frugalrl.latent.world_model import LatentWorldModel, reward_class
from frugalrl.latent.world_model_fit import TransitionSampler, fit_world_model, heldout_metrics
from frugalrl.tracking.registry import log_and_register
from frugalrl.tracking.store import check_tracking


def use_bf16(mode: str, device: torch.device) -> bool:
    return mode == "bf16" or (mode == "auto" and device.type == "cuda")


def autocast(enabled: bool, device: torch.device) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def build_latent_models(config: ExperimentConfig, num_actions: int) -> LatentModels:
    atari, latent = config.env.atari, config.latent
    encoder = FrameEncoder(atari.stack_num, atari.img_size, latent.latent_dim, latent.gradient_checkpointing)
    decoder = FrameDecoder(encoder)
    world_model = LatentWorldModel(latent.latent_dim, num_actions, latent.world_model.hidden)
    return LatentModels(encoder, decoder, world_model)


def weighted_reconstruction(recon: torch.Tensor, frames: torch.Tensor, motion_weight: float) -> torch.Tensor:
    """Squared error with weight ``1 + motion_weight`` on moving pixels, normalised by the weights."""
    error = (recon.float() - frames.float() / 255.0) ** 2
    if motion_weight <= 0:
        return error.mean()
    weight = 1.0 + motion_weight * motion_mask(frames)
    return (error * weight).sum() / (weight.sum() * frames.shape[1])


def encoder_step_loss(models: LatentModels, batch: dict[str, torch.Tensor], config: ExperimentConfig) -> torch.Tensor:
    latent = config.latent
    weight = 0.0 if latent.objective == "recon" else latent.motion_weight
    z = models.encoder(batch["obs"])
    loss = weighted_reconstruction(models.decoder(z), batch["obs"], weight)
    if latent.objective == "dynamics":
        with torch.no_grad():
            z_next = models.encoder(batch["next_obs"])
        # The latent-matching term trains the world model only: letting it pull on the encoder
        # collapses every latent onto one point (measured: latent std 0.007). The encoder is
        # shaped by reward / termination prediction and by decoding the predicted next latent.
        wm_loss, _ = models.world_model.loss(z.detach(), batch["action"], z_next, batch["reward"], batch["done"])
        pred = models.world_model(z, batch["action"])
        keep = ~batch["done"]
        if keep.any():  # the predicted next latent must decode to the next frames
            decoded = models.decoder(pred.next_latent[keep])
            loss = loss + weighted_reconstruction(decoded, batch["next_obs"][keep], weight)
        reward_terms = F.cross_entropy(pred.reward_logits, reward_class(batch["reward"]))
        reward_terms = reward_terms + F.binary_cross_entropy_with_logits(pred.done_logit, batch["done"].float())
        loss = loss + 0.1 * (wm_loss + reward_terms)
    return loss


def train_latent_models(
    config: ExperimentConfig,
    data: FrameDataset | dict[str, FrameDataset],
    meter: CostMeter,
    device: torch.device | None = None,
    start: LatentModels | None = None,
    updates: int | None = None,
) -> tuple[LatentModels, dict[str, Any]]:
    """Fit encoder (+ decoder, + world model) on the training part of ``data``; held-out metrics.

    ``data``: one game's frames, or ``{game: frames}`` for a shared encoder: then every game gets
    its own world-model head (``LatentModels.heads``) and the updates take the games in turn.
    ``start``: models to continue from (transfer: a pretrained encoder fine-tuned on a new game);
    ``updates`` overrides ``latent.pretrain_updates``.
    """
    device = device or torch.device("cpu")
    latent = config.latent
    updates = latent.pretrain_updates if updates is None else updates
    torch.manual_seed(config.seed)
    datasets = data if isinstance(data, dict) else {data.meta["env_id"]: data}
    games = list(datasets)
    first = datasets[games[0]]
    models = start or build_latent_models(config, int(first.meta["num_actions"]))
    if len(games) > 1:
        hidden = latent.world_model.hidden
        models.heads = {games[0]: models.world_model} | {
            game: LatentWorldModel(latent.latent_dim, int(datasets[game].meta["num_actions"]), hidden)
            for game in games[1:]
        }
    heads = models.heads or {games[0]: models.world_model}
    models.encoder.train()
    splits = {game: d.split(latent.holdout_fraction) for game, d in datasets.items()}
    samplers = {
        game: TransitionSampler(d, splits[game][0], config.seed + i) for i, (game, d) in enumerate(datasets.items())
    }
    params = [*models.encoder.parameters(), *models.decoder.parameters()]
    if latent.objective == "dynamics":
        params += [p for head in heads.values() for p in head.parameters()]
    optimizer = torch.optim.Adam(params, lr=latent.learning_rate)
    bf16 = use_bf16(latent.mixed_precision, device)
    started = time.perf_counter()
    losses: list[float] = []
    for update in range(updates):
        game = games[update % len(games)]
        models.world_model = heads[game]
        batch = samplers[game].batch(latent.batch_size)

        def step(b=batch) -> torch.Tensor:
            with autocast(bf16, device):
                loss = encoder_step_loss(models, b, config)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss.detach()

        losses.append(float(meter.run_counted("encoder_train", step, latent.batch_size)))
        meter.count("encoder_train", latent.batch_size)
    encoder_s = time.perf_counter() - started
    models.encoder.eval()
    wm_loss = None
    for game, sampler in samplers.items():
        models.world_model = heads[game]
        if latent.objective != "dynamics":
            steps = max(1, latent.world_model.epochs * len(sampler) // (latent.batch_size * 4))
            wm_loss = fit_world_model(models, sampler, config, meter, steps)
    per_game = {}
    for game, d in datasets.items():
        models.world_model = heads[game]
        per_game[game] = heldout_metrics(models, d, splits[game][1], config)
    models.world_model = heads[games[0]]
    metrics = {
        "objective": latent.objective,
        "latent_dim": latent.latent_dim,
        "compression_ratio": round(models.encoder.in_channels * models.encoder.frame_size**2 / latent.latent_dim, 1),
        "encoder_updates": updates,
        "final_loss": float(np.mean(losses[-50:])) if losses else float("nan"),
        "world_model_loss": wm_loss,
        "bf16": bf16,
        "gradient_checkpointing": latent.gradient_checkpointing,
        "encoder_train_s": round(encoder_s, 2),
        "pretrain_flops": meter.pretrain_flops,
        **(per_game[games[0]] if len(games) == 1 else {"games": games, "per_game": per_game, **mean_figures(per_game)}),
    }
    return models, metrics


def mean_figures(per_game: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The mean over games of every numeric held-out figure that all games have."""
    keys = [k for k, v in next(iter(per_game.values())).items() if isinstance(v, int | float)]
    return {
        k: round(float(np.mean([m[k] for m in per_game.values()])), 4)
        for k in keys
        if all(isinstance(m.get(k), int | float) for m in per_game.values())
    }


def pretrain_from_frames(config: ExperimentConfig, out_dir: Path, dataset: Path) -> dict[str, Any]:
    """``pretrain_encoder`` on collected frames, probed as ``latent.probe`` says: the pretraining stage's
    training (``frugalrl.pretraining.latent``)."""
    return pretrain_encoder(config, Path(out_dir), dataset=Path(dataset), probe=config.latent.probe)


def pretrain_encoder(
    config: ExperimentConfig,
    out_dir: Path,
    dataset: Path | None = None,
    probe: bool = True,
    games: list[str] | None = None,
) -> dict[str, Any]:
    """Collect (unless ``dataset`` is given), train, probe, save ``encoder.pt``; log and register in MLflow.

    ``games`` (default ``latent.pretrain_games``, else ``env.id``): with several, one shared encoder
    trains on frames of all of them, with a world-model head per game. Writes the dataset
    (``dataset.npz``, or ``dataset-<game>.npz`` per game), ``encoder.pt``, ``metrics.json`` and
    ``summary.json`` to ``out_dir`` and registers ``<game>-encoder``, or ``atari-encoder`` for several
    games (version score: the ball probe R^2, the mean over the probed games).
    """
    games = check_games(games or config.latent.pretrain_games or [config.env.id])
    if dataset is not None and len(games) > 1:
        raise ConfigError(
            f"a frame dataset ({dataset}) holds one game's frames, and {len(games)} games were asked for "
            "(--games / latent.pretrain_games); drop the dataset so frames of every game are collected"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    meter = CostMeter()
    if len(games) > 1:
        data: FrameDataset | dict[str, FrameDataset] = collect_games(config, games)
        sha = save_games(data, out)
        frames = sum(len(d) for d in data.values())
    else:
        config = config if games[0] == config.env.id else game_config(config, games[0])
        data = collect_frames(config) if dataset is None else load_dataset(dataset)
        sha = data.save(out / "dataset.npz") if dataset is None else data.content_hash()
        frames = len(data)
    models, metrics = train_latent_models(config, data, meter)
    metrics["dataset_sha256"] = sha
    metrics["dataset_frames"] = frames
    if probe:
        metrics.update(probe_games(models, config, games))
    # What making these models cost travels with them: a run that loads them lists it as shared pretraining.
    models.metadata = {"env_id": games[0], "games": games, "objective": config.latent.objective,
                       "dataset_sha256": sha, "pretrain_flops": meter.total_flops}  # fmt: skip
    save_latent(out / "encoder.pt", models)
    atomic_write_bytes(out / "metrics.json", (json.dumps(metrics, indent=2) + "\n").encode())
    summary: dict[str, Any] = {
        "env_id": config.env.id,
        "algo": "latent_pretrain",
        "seed": config.seed,
        "techniques": ["latent_pretrain"],
        **meter.summary(),
        **{k: v for k, v in metrics.items() if not isinstance(v, dict)},
        "wall_s": round(time.perf_counter() - started, 3),
        "encoder_parameters": sum(p.numel() for p in models.encoder.parameters()),
        **{k: metrics[k] for k in ("per_game", "probe") if k in metrics},
        "mlflow_run_id": None,
        "model_uri": None,
    }
    if config.tracking.enabled:
        summary.update(_log_encoder(config, out, models, summary))
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    return summary


def probe_games(models: LatentModels, config: ExperimentConfig, games: list[str]) -> dict[str, Any]:
    """The RAM probe on every game that has probe labels; several: per game, plus the means."""
    lookup = _ceiling_in_mlflow if config.tracking.enabled else None
    probed = [g for g in games if ale_game_name(g) in PROBE_LABELS]
    if len(games) == 1:
        return probe_latent(models.encoder, config, ceiling_lookup=lookup) if probed else {}
    results = {g: probe_latent(models.encoder, game_config(config, g), ceiling_lookup=lookup) for g in probed}
    out: dict[str, Any] = {"probe": results}
    for key in ("ball_r2_mlp", "paddle_r2_mlp", "ball_ceiling_r2"):
        if results:
            out[key] = round(float(np.mean([r[key] for r in results.values()])), 4)
        out.update({f"{ale_game_name(g)}_{key}": r[key] for g, r in results.items()})
    return out


def _ceiling_in_mlflow(key: str) -> dict[str, float] | None:
    """The probe ceiling of an earlier encoder run on the same frames (tag ``frugalrl.probe.ceiling_key``)."""
    import mlflow

    try:
        mlflow.set_tracking_uri(check_tracking())
        runs = mlflow.search_runs(
            search_all_experiments=True, filter_string=f"tags.`frugalrl.probe.ceiling_key` = '{key}'",
            max_results=1, output_format="list",
        )  # fmt: skip
    except (TrackingError, mlflow.exceptions.MlflowException):
        return None  # the run's own logging reports an unreachable store; here it only costs the ceiling
    figures = {k: float(v) for k, v in (runs[0].data.metrics if runs else {}).items() if k.startswith("r2_cnn_")}
    return figures or None


def _log_encoder(config: ExperimentConfig, out: Path, models: LatentModels, summary: dict) -> dict:
    """MLflow run with the metrics and files; registers ``<game>-encoder``, or ``atari-encoder`` for several
    games (score: the ball probe R^2, the mean over probed games, or the PSNR when the probe was skipped)."""
    key, name = ("ball_r2_mlp", "ball_probe_r2") if "ball_r2_mlp" in summary else ("psnr_db", "psnr_db")
    files = [out / "metrics.json", out / "encoder.pt"]
    encoder = models.encoder
    example = np.zeros((1, encoder.in_channels, encoder.frame_size, encoder.frame_size), dtype=np.uint8)  # frames
    tags = {"frugalrl.probe.ceiling_key": summary["ceiling_key"]} if "ceiling_key" in summary else {}
    floors = {"psnr_db": (summary["psnr_db"], config.latent.champion_min_psnr_db)}
    if "ball_r2_mlp" in summary:
        floors["ball_r2_mlp"] = (summary["ball_r2_mlp"], config.latent.champion_min_ball_r2)
    games = summary.get("games") or [config.env.id]
    if len(games) > 1:  # one encoder for several games: registered once, as atari-encoder
        tags["frugalrl.encoder.games"] = ",".join(games)
    task = "atari" if len(games) > 1 else None
    return log_and_register(
        config, f"{config.name}-encoder", summary, files, encoder, "encoder", key, name, example, tags, floors, task
    )
