"""``probe-latent`` and ``visualize-latent``: what a pretrained frame encoder's latent holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import mlflow
import typer

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import validate_config
from frugalrl.envs.registry import is_atari
from frugalrl.errors import FrugalError
from frugalrl.latent.probe import PROBE_LABELS, probe_latent
from frugalrl.latent.store import load_latent
from frugalrl.latent.visualize import visualize_latent
from frugalrl.rundir import check_new_run_dir
from frugalrl.tracking.runs import RunTracker


def _latent_config(encoder: str, env_id: str) -> tuple:  # noqa: ANN202 - (LatentModels, ExperimentConfig)
    if not is_atari(env_id):
        raise FrugalError(
            f"--env {env_id}: a frame encoder reads Atari screens; use an ALE/ game such as ALE/Breakout-v5"
        )
    models = load_latent(encoder)
    stack = models.encoder.in_channels
    config = validate_config(
        {"env": {"id": env_id, "atari": {"stack_num": stack, "img_size": models.encoder.frame_size}}},
        source="--env",
    )
    return models, config


def probe_latent_command(
    encoder: Annotated[str, typer.Option(help="encoder.pt, its run directory, or models:/<game>-encoder@champion")],
    game: Annotated[str, typer.Option(help="breakout or pong")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write probe.json.")],
    steps: Annotated[int, typer.Option(min=200, help="Random-play env steps to collect for the probe.")] = 8000,
    ceiling: Annotated[bool, typer.Option(help="Also train the supervised CNN ceiling.")] = True,
    mlflow: Annotated[bool, typer.Option(help="Log the figures to an MLflow run.")] = True,
) -> None:
    """Held-out R^2 of linear and MLP probes from the latent to RAM-annotated positions."""
    if game not in PROBE_LABELS:
        raise FrugalError(f"--game {game!r}: no probe labels; allowed: {', '.join(PROBE_LABELS)}")
    check_new_run_dir(out, resumable=False)  # an earlier probe.json, or another run's files, stay as they are
    env_id = {"breakout": "ALE/Breakout-v5", "pong": "ALE/Pong-v5"}[game]
    models, config = _latent_config(encoder, env_id)
    results = probe_latent(models.encoder, config, steps=steps, ceiling_steps=1500 if ceiling else 0)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "probe.json", (json.dumps(results, indent=2) + "\n").encode())
    if mlflow:
        _log_latent_files(config, encoder, "probe-latent", [out / "probe.json"], results)
    for key, value in results.items():
        if key.startswith(("r2_", "ball_", "paddle_")):
            typer.echo(f"{key:<22} {value:8.4f}")
    typer.echo(f"probe: {out / 'probe.json'}")


def visualize_latent_command(
    encoder: Annotated[str, typer.Option(help="encoder.pt, its run directory, or models:/<game>-encoder@champion")],
    env: Annotated[str, typer.Option(help="The ALE env id, e.g. ALE/Breakout-v5")],
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")],
    mlflow: Annotated[bool, typer.Option(help="Log the picture to an MLflow run.")] = True,
) -> None:
    """Frames beside their reconstructions (with PSNR) and a 2-D projection of the latents."""
    models, config = _latent_config(encoder, env)
    path = visualize_latent(models, config, out)
    if mlflow:
        _log_latent_files(config, encoder, "visualize-latent", [path], {})
    typer.echo(f"latent picture: {path}")


def _log_latent_files(config: object, encoder: str, name: str, files: list[Path], metrics: dict) -> None:
    """One MLflow run holding an encoder's probe figures or picture, tagged with the encoder it describes."""
    with RunTracker(config, run_name=name) as tracker:
        mlflow.set_tag("frugalrl.encoder", encoder)
        tracker.log_metrics({k: v for k, v in metrics.items() if isinstance(v, int | float)}, step=0)
        for path in files:
            tracker.log_artifact(path, artifact_path="latent")
        typer.echo(f"MLflow run {tracker.run_id}")
