"""``frugalrl pretrain``: the steps that train a model for runs to use (importance evaluator, frame encoder)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.cli.options import SetOption
from frugalrl.config import load_config
from frugalrl.envs.factory import check_env
from frugalrl.envs.registry import is_atari
from frugalrl.errors import FrugalError
from frugalrl.latent.pretrain import pretrain_encoder
from frugalrl.pivot.pretrain import pretrain_evaluator
from frugalrl.rundir import check_new_run_dir

pretrain_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Pretraining steps: importance evaluator, frame encoder."
)


def _echo_registered(summary: dict) -> None:
    verdict = "champion" if summary.get("promoted") else f"challenger, not champion: {summary.get('promotion')}"
    typer.echo(f"registered {summary['registered_model']} version {summary['registered_version']} ({verdict})")


@pretrain_app.command("evaluator")
def pretrain_evaluator_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="Experiment YAML (its pivot section).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write evaluator.pt, metrics, summary.")],
    dataset: Annotated[
        Path | None, typer.Option(help="A labelled dataset.npz to train on instead of collecting.")
    ] = None,
    overrides: SetOption = None,
) -> None:
    """Pretrain the PivotRL importance evaluator on labelled baseline-PPO rollouts."""
    check_new_run_dir(out, resumable=False)  # another run's files are never written over
    loaded = load_config(config, overrides or [])
    check_env(loaded)
    summary = pretrain_evaluator(loaded, out, dataset)
    typer.echo(f"held-out Spearman {summary['spearman']:.3f} on {summary['test_samples']} samples")
    if summary.get("registered_model"):
        _echo_registered(summary)
    typer.echo(f"evaluator: {out / 'evaluator.pt'}")


@pretrain_app.command("encoder")
def pretrain_encoder_command(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Experiment YAML (an ALE env and its latent section).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write encoder.pt, metrics, summary.")],
    dataset: Annotated[Path | None, typer.Option(help="A frame dataset.npz to train on instead of collecting.")] = None,
    probe: Annotated[bool, typer.Option(help="Run the RAM probe on the trained latent.")] = True,
    games: Annotated[
        list[str] | None,
        typer.Option(help="ALE games whose frames train one shared encoder (repeat, or list after --games)."),
    ] = None,
    overrides: SetOption = None,
) -> None:
    """Pretrain the frame encoder and the latent world model(s); probe and register them.

    With several --games, one encoder trains on frames of all of them, with a world-model head per
    game; it registers once, as atari-encoder, and runs use it by URI (latent.encoder_from).
    """
    check_new_run_dir(out, resumable=False)  # another run's files are never written over
    loaded = load_config(config, overrides or [])
    if not is_atari(loaded.env.id):
        raise FrugalError(
            f"{config}: env {loaded.env.id}: a frame encoder is pretrained on Atari screens; use an ALE/ game"
        )
    probe = probe and loaded.latent.probe
    summary = pretrain_encoder(loaded, out, dataset, probe, games)
    typer.echo(f"held-out PSNR {summary['psnr_db']:.2f} dB at latent_dim {summary['latent_dim']}")
    for game, figures in (summary.get("probe") or {"": summary if probe else {}}).items():
        if "ball_r2_mlp" in figures:
            typer.echo(
                f"{game + ': ' if game else ''}ball probe R^2 {figures['ball_r2_mlp']:.3f} "
                f"(CNN ceiling {figures['ball_ceiling_r2']:.3f}), paddle {figures['paddle_r2_mlp']:.3f}"
            )
    if summary.get("registered_model"):
        _echo_registered(summary)
    typer.echo(f"encoder: {out / 'encoder.pt'}")
