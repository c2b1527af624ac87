"""Training a policy and measuring it: ``train``, ``tune``, ``evaluate``, ``sync``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from frugalrl import api
from frugalrl.cli.options import SetOption
from frugalrl.config import MAX_EVAL_EPISODES, ExperimentConfig
from frugalrl.errors import FrugalError
from frugalrl.fusion.launch import train_on_workers, under_torchrun
from frugalrl.ops.video import record_episode
from frugalrl.policy_store import BEST_POLICY_FILE, registered_policy_file
from frugalrl.resume import check_run_schema
from frugalrl.tracking.offline import sync_run_dir
from frugalrl.training import train as run_training
from frugalrl.tuning import tune as run_tuning


def train(
    config: Annotated[Path | None, typer.Argument(help="Experiment YAML (not needed with --resume).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory to write.")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue the run in this directory.")] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Train on N workers under torchrun (gradient fusion).")
    ] = None,
    overrides: SetOption = None,
) -> None:
    """Train a policy; writes OUT/summary.json, a checkpoint and the resolved config."""
    if workers is not None:
        overrides = [*(overrides or []), f"distributed.workers={workers}"]
    if config is not None and out is not None and not under_torchrun():
        cfg = api.load_config(config, overrides)  # a bad config fails here, before any worker starts
        if cfg.distributed.workers > 1:
            summary = train_on_workers(config, out, overrides or [], cfg.distributed.workers)
            typer.echo(f"eval_mean {summary['eval_mean']:.2f} over {summary['eval_episodes']} episodes; "
                       f"{summary['workers']} workers, {summary['bytes_sent']:,.0f} bytes sent "
                       f"({summary['compression_ratio']:.1f}x less than dense)")  # fmt: skip
            typer.echo(f"summary: {out / 'summary.json'}")
            return

    if resume is not None:
        if out is not None and out.resolve() != resume.resolve():
            raise FrugalError(f"--out {out} and --resume {resume} differ; a resumed run writes into its own directory")
        if overrides:
            raise FrugalError("--set cannot change a run being resumed; start a new run with --out instead")
        check_run_schema(resume)  # a run of another schema: said as such, whichever config comes with it
        cfg = api.load_config(config if config is not None else resume / "config.yaml")
        summary = _train_here(cfg, resume, resume=True)
        out = resume
    else:
        if config is None or out is None:
            raise FrugalError(
                "train needs CONFIG and --out DIR (or --resume DIR); "
                "e.g. frugalrl train configs/cartpole-ppo.yaml --out runs/cartpole"
            )
        cfg = api.load_config(config, overrides)
        summary = _train_here(cfg, out)
    if "rank" in summary:  # a torchrun worker other than rank 0: rank 0 reports
        typer.echo(f"worker rank {summary['rank']} done")
        return
    typer.echo(
        f"eval_mean {summary['eval_mean']:.2f} +- {summary['eval_std']:.2f} over {summary['eval_episodes']} episodes"
    )
    typer.echo(f"summary: {out / 'summary.json'}")


def _train_here(config: ExperimentConfig, out: Path, resume: bool = False) -> dict[str, Any]:
    """Train in this process: through the Python API, or as one torchrun worker of a multi-worker run."""
    if under_torchrun():
        return run_training(config, out, resume=resume)
    return api.train(config, out, resume=resume).summary


def tune(
    config: Annotated[Path, typer.Option("--config", "-c", help="Experiment YAML with a tuning section.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the trials' runs and best.json.")],
    worker: Annotated[int, typer.Option(min=0, help="This worker's index (seeds its sampler).")] = 0,
    overrides: SetOption = None,
) -> None:
    """Search the config's tuning.space with Optuna; several workers may share one study (OPTUNA_STORAGE)."""
    result = run_tuning(api.load_config(config, overrides), out, worker)
    typer.echo(f"best {result['best_value']:.2f} with {' '.join(result['best_overrides'])}")
    typer.echo(f"trials: {result['trials']}; best: {out / 'best.json'}")


def evaluate(
    model_uri: Annotated[str, typer.Argument(help="Run dir, policy.pt, or models:/name@alias, runs:/id/policy")],
    env: Annotated[str | None, typer.Option(help="Env id; default: the one the policy was trained on.")] = None,
    episodes: Annotated[
        int, typer.Option(min=1, max=MAX_EVAL_EPISODES, help=f"Episodes to play, 1 to {MAX_EVAL_EPISODES:,}.")
    ] = 20,
    seed: Annotated[int, typer.Option(min=0)] = 10_000,
    stochastic: Annotated[bool, typer.Option(help="Sample actions instead of taking the mode.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    video: Annotated[
        Path | None, typer.Option(help="Also record one deterministic episode (seed --seed) as a GIF here.")
    ] = None,
) -> None:
    """Evaluate a policy over fixed seeds: mean, std, IQM and a 95% bootstrap CI."""
    policy = api.load_policy(model_uri)
    if (chosen := registered_policy_file(Path(model_uri))).name == BEST_POLICY_FILE:  # a run directory's, as registered
        typer.echo(f"policy: {chosen} (the run's eval.policy is best)", err=json_out)
    env_config = api.evaluation_env(policy, env)
    result = api.evaluate(policy, episodes, seed, deterministic=not stochastic, env=env)
    env_id = env_config.id
    if json_out:
        typer.echo(json.dumps({"env_id": env_id, **result.metrics(), "returns": result.returns}))
    else:
        typer.echo(
            f"{env_id}: mean {result.mean:.2f}  std {result.std:.2f}  IQM {result.iqm:.2f}  "
            f"95% CI [{result.ci_low:.2f}, {result.ci_high:.2f}]  ({episodes} episodes)"
        )
    if video is not None:
        recorded = record_episode(policy, env_config, video, seed=seed)
        typer.echo(
            f"video: {recorded['path']} (episode from seed {seed}: return {recorded['episode_return']:.1f}, "
            f"{recorded['episode_steps']} steps, {recorded['frames']} frames)",
            err=json_out,  # --json keeps stdout one JSON document
        )


def sync(run_dir: Annotated[Path, typer.Argument(help="A run directory (the --out of train).")]) -> None:
    """Send what a run kept while its MLflow store was away; mark a run that was killed KILLED."""
    typer.echo(sync_run_dir(run_dir))
