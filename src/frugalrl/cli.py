"""The ``frugalrl`` command. Thin: it parses arguments and calls the library.

Every user-fixable problem is a ``FrugalError``: one line on stderr, exit code 2.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from frugalrl.errors import INTERRUPTED, FrugalError

# eval.episodes' bound (frugalrl.config.MAX_EVAL_EPISODES, not imported: the CLI starts without pydantic)
MAX_EVAL_EPISODES = 10_000

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="frugalrl: cheaper RL training, every run auditable.",
)
config_app = typer.Typer(no_args_is_help=True, help="Experiment configs.")
pretrain_app = typer.Typer(no_args_is_help=True, help="Pretraining steps: importance evaluator, frame encoder.")
pipeline_app = typer.Typer(no_args_is_help=True, help="Kubeflow pipelines: compile, run locally.")
peft_app = typer.Typer(no_args_is_help=True, help="Parameter-efficient fine-tuning: compare methods, apply adapters.")
app.add_typer(config_app, name="config")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(pretrain_app, name="pretrain")
app.add_typer(peft_app, name="peft")
trainjob_app = typer.Typer(
    no_args_is_help=True, help="Kubeflow Trainer v2 TrainJob manifests for multi-worker training (the default)."
)
app.add_typer(trainjob_app, name="trainjob")
pytorchjob_app = typer.Typer(
    no_args_is_help=True, help="Kubeflow Training Operator PyTorchJob manifests (legacy; TrainJob is the default)."
)
app.add_typer(pytorchjob_app, name="pytorchjob")
image_app = typer.Typer(no_args_is_help=True, help="The step image: build it from this checkout, push it.")
app.add_typer(image_app, name="image")

SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override a config value: --set ppo.learning_rate=3e-4")
]


@app.command()
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
    from frugalrl.config import load_config
    from frugalrl.fusion.launch import torchrun, under_torchrun
    from frugalrl.train import train as run_training

    if workers is not None:
        overrides = [*(overrides or []), f"distributed.workers={workers}"]
    if config is not None and out is not None and not under_torchrun():
        cfg = load_config(config, overrides or [])  # a bad config fails here, before any worker starts
        if cfg.distributed.workers > 1:
            sets = [a for o in overrides or [] for a in ("--set", o)]
            code = torchrun([str(config), "--out", str(out), *sets], cfg.distributed.workers)
            if code != 0:
                raise FrugalError(f"a training worker failed (exit code {code}); its log above says why")
            summary = json.loads((out / "summary.json").read_text())
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
        cfg = load_config(config if config is not None else resume / "config.yaml")
        summary = run_training(cfg, resume, resume=True)
        out = resume
    else:
        if config is None or out is None:
            raise FrugalError(
                "train needs CONFIG and --out DIR (or --resume DIR); "
                "e.g. frugalrl train configs/cartpole-ppo.yaml --out runs/cartpole"
            )
        cfg = load_config(config, overrides or [])
        summary = run_training(cfg, out)
    if "rank" in summary:  # a torchrun worker other than rank 0: rank 0 reports
        typer.echo(f"worker rank {summary['rank']} done")
        return
    typer.echo(
        f"eval_mean {summary['eval_mean']:.2f} +- {summary['eval_std']:.2f} over {summary['eval_episodes']} episodes"
    )
    typer.echo(f"summary: {out / 'summary.json'}")


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
    from frugalrl.config import load_config
    from frugalrl.envs.factory import check_env
    from frugalrl.pivot.pretrain import pretrain_evaluator

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
    from frugalrl.config import load_config
    from frugalrl.envs.registry import is_atari
    from frugalrl.latent.pretrain import pretrain_encoder

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


@app.command()
def tune(
    config: Annotated[Path, typer.Option("--config", "-c", help="Experiment YAML with a tuning section.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the trials' runs and best.json.")],
    worker: Annotated[int, typer.Option(min=0, help="This worker's index (seeds its sampler).")] = 0,
    overrides: SetOption = None,
) -> None:
    """Search the config's tuning.space with Optuna; several workers may share one study (OPTUNA_STORAGE)."""
    from frugalrl.config import load_config
    from frugalrl.tuning import tune as run_tuning

    result = run_tuning(load_config(config, overrides or []), out, worker)
    typer.echo(f"best {result['best_value']:.2f} with {' '.join(result['best_overrides'])}")
    typer.echo(f"trials: {result['trials']}; best: {out / 'best.json'}")


@app.command()
def audit(
    run_id: Annotated[str, typer.Argument(help="The MLflow run to re-run (its id, from the UI or summary.json).")],
    repo: Annotated[Path | None, typer.Option(help="The git repository holding the run's commit.")] = None,
    keep: Annotated[Path | None, typer.Option(help="Keep the downloaded and re-run files here.")] = None,
    allow_image_change: Annotated[
        bool, typer.Option("--allow-image-change", help="Call a run reproduced even if its image digest differs.")
    ] = False,
) -> None:
    """Re-run a tracked run on its recorded commit and config; exit 0 if its metrics reproduce, 1 if not.

    The re-run's image digest is this process's FRUGALRL_IMAGE_DIGEST (unknown outside the step image)."""
    from frugalrl.audit import audit as run_audit

    result = run_audit(run_id, repo, keep=keep, allow_image_change=allow_image_change)
    verdict = "reproduced" if result["reproduced"] else "NOT reproduced"
    typer.echo(f"run {run_id} at {result['commit'][:12]} on {result['device']}: {verdict} ({result['criterion']})")
    for line in result["differences"] + result["notes"]:
        typer.echo(f"  {line}")
    if not result["reproduced"]:
        raise typer.Exit(1)


def _manifest_out(out: Path | None) -> None:
    """Where a rendered manifest goes: refused in one line before anything is built."""
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        problem = "is a folder" if out.is_dir() else f"is in {out.parent}, which does not exist"
        raise FrugalError(f"-o {out} {problem}; give a YAML file in an existing folder, e.g. -o job.yaml")


def _write_manifest(manifest: dict, kind: str, out: Path | None) -> None:
    import yaml

    text = yaml.safe_dump(manifest, sort_keys=False)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text)
        typer.echo(f"valid {kind} written: {out}")


def _validate_file(file: Path, kind: str, validate: Any) -> None:
    """Validate every document of a manifest file as ``kind``; one line with the first problem."""
    import yaml

    from frugalrl.config import read_text_file

    command = kind.lower()
    text = read_text_file(file, f"{kind} manifest", f"a file written by frugalrl {command} render")
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError:
        raise FrugalError(f"{file}: not valid YAML; fix the syntax") from None
    if not docs:
        raise FrugalError(f"{file}: empty; write a {kind} manifest (frugalrl {command} render makes one)")
    for doc in docs:
        if not isinstance(doc, dict):
            raise FrugalError(f"{file}: a {type(doc).__name__}, not a {kind} manifest (a mapping)")
        validate(doc)
    typer.echo(f"{file}: valid {kind}")


@trainjob_app.command("render")
def trainjob_render(
    name: Annotated[str, typer.Option(help="Job name (DNS-1035 label: starts with a letter).")],
    workers: Annotated[int, typer.Option(min=2, help="Training nodes (spec.trainer.numNodes).")],
    image: Annotated[
        str, typer.Option(help="The frugalrl CUDA image by digest, NAME@sha256:... (frugalrl image push prints it).")
    ],
    gpus_per_node: Annotated[
        int, typer.Option("--gpus-per-node", min=0, max=16, help="GPUs per node, one torchrun process each.")
    ] = 1,
    config_map: Annotated[str, typer.Option(help="ConfigMap holding config.yaml.")] = "frugalrl-train-config",
    output_claim: Annotated[
        str, typer.Option(help="PersistentVolumeClaim (ReadWriteMany) the run directories go to.")
    ] = "frugalrl-runs",
    runtime: Annotated[str, typer.Option(help="The ClusterTrainingRuntime to run on.")] = "torch-distributed",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="YAML file (default: stdout).")] = None,
) -> None:
    """Render (and validate) the TrainJob for multi-worker training on the GPU node pool."""
    from frugalrl.fusion import trainjob

    _manifest_out(out)
    manifest = trainjob.trainjob_manifest(
        name, config_map, workers, image, gpus_per_node=gpus_per_node, node_selector=trainjob.GPU_POOL_SELECTOR,
        tolerations=trainjob.GPU_TOLERATIONS, output_claim=output_claim, runtime=runtime,
    )  # fmt: skip
    trainjob.validate_trainjob(manifest)
    _write_manifest(manifest, "TrainJob", out)


@trainjob_app.command("validate")
def trainjob_validate(file: Path) -> None:
    """Validate a TrainJob manifest (the Trainer API's fields, 2+ nodes, image by digest, torchrun); exit 2 if not."""
    from frugalrl.fusion.trainjob import validate_trainjob

    _validate_file(file, "TrainJob", validate_trainjob)


@pytorchjob_app.command("render")
def pytorchjob_render(
    name: Annotated[str, typer.Option(help="Job name (DNS label).")],
    workers: Annotated[int, typer.Option(min=2, help="Master + workers.")],
    image: Annotated[str, typer.Option(help="The frugalrl CUDA image.")] = "frugalrl:0.1.0-cuda",
    config_map: Annotated[str, typer.Option(help="ConfigMap holding config.yaml.")] = "frugalrl-train-config",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="YAML file (default: stdout).")] = None,
) -> None:
    """Render (and validate) the legacy PyTorchJob for multi-worker training on the GPU node pool."""
    from frugalrl.fusion.pytorchjob import pytorchjob_manifest, validate_manifest
    from frugalrl.fusion.trainjob import GPU_POOL_SELECTOR, GPU_TOLERATIONS

    _manifest_out(out)
    manifest = pytorchjob_manifest(
        name, config_map, workers, image, node_selector=GPU_POOL_SELECTOR, tolerations=GPU_TOLERATIONS
    )
    validate_manifest(manifest)
    _write_manifest(manifest, "PyTorchJob", out)


@pytorchjob_app.command("validate")
def pytorchjob_validate(file: Path) -> None:
    """Validate a PyTorchJob manifest (its fields and every pod template); exit 2 with the first problem."""
    from frugalrl.fusion.pytorchjob import validate_manifest

    _validate_file(file, "PyTorchJob", validate_manifest)


@peft_app.command("compare")
def peft_compare_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="Experiment YAML with a peft section.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the table, plot, adapters, summary.")],
    workers: Annotated[int, typer.Option(min=1, help="Fine-tuning runs in parallel (one process each).")] = 1,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted comparison in OUT.")] = False,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Write the table from the runs finished in OUT; run none.")
    ] = False,
    overrides: SetOption = None,
) -> None:
    """Fine-tune the source policy on every target with every method; write the comparison table."""
    from frugalrl.config import load_config
    from frugalrl.peft.compare import compare

    summary = compare(load_config(config, overrides or []), out, workers, resume=resume, report_only=report_only)
    typer.echo((out / "peft_table.md").read_text())
    typer.echo(f"best parameter-efficient method: {summary['best_method']}; table: {out / 'peft_table.csv'}")


@peft_app.command("apply")
def peft_apply_command(
    base: Annotated[str, typer.Argument(help="The base SAC policy: run directory or models:/NAME@ALIAS.")],
    adapter: Annotated[str, typer.Argument(help="adapter.pt, its directory, or an MLflow artifact URI (runs:/...).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the adapted policy.pt.")],
) -> None:
    """Load an adapter onto its base policy; writes OUT/policy.pt (loadable by evaluate)."""
    from frugalrl.peft.store import apply_adapter
    from frugalrl.policy_store import save_policy

    policy, config = apply_adapter(base, adapter)
    out.mkdir(parents=True, exist_ok=True)
    save_policy(out / "policy.pt", policy, config)
    typer.echo(f"{config.policy.adapter.method} adapter applied: {out / 'policy.pt'}")


def _latent_config(encoder: str, env_id: str) -> tuple:  # noqa: ANN202 - (LatentModels, ExperimentConfig)
    from frugalrl.config import validate_config
    from frugalrl.envs.registry import is_atari
    from frugalrl.latent.store import load_latent

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


@app.command("probe-latent")
def probe_latent_command(
    encoder: Annotated[str, typer.Option(help="encoder.pt, its run directory, or models:/<game>-encoder@champion")],
    game: Annotated[str, typer.Option(help="breakout or pong")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write probe.json.")],
    steps: Annotated[int, typer.Option(min=200, help="Random-play env steps to collect for the probe.")] = 8000,
    ceiling: Annotated[bool, typer.Option(help="Also train the supervised CNN ceiling.")] = True,
    mlflow: Annotated[bool, typer.Option(help="Log the figures to an MLflow run.")] = True,
) -> None:
    """Held-out R^2 of linear and MLP probes from the latent to RAM-annotated positions."""
    from frugalrl.checkpoint import atomic_write_bytes
    from frugalrl.latent.probe import PROBE_LABELS, probe_latent

    if game not in PROBE_LABELS:
        raise FrugalError(f"--game {game!r}: no probe labels; allowed: {', '.join(PROBE_LABELS)}")
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


@app.command("visualize-latent")
def visualize_latent_command(
    encoder: Annotated[str, typer.Option(help="encoder.pt, its run directory, or models:/<game>-encoder@champion")],
    env: Annotated[str, typer.Option(help="The ALE env id, e.g. ALE/Breakout-v5")],
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")],
    mlflow: Annotated[bool, typer.Option(help="Log the picture to an MLflow run.")] = True,
) -> None:
    """Frames beside their reconstructions (with PSNR) and a 2-D projection of the latents."""
    from frugalrl.latent.visualize import visualize_latent

    models, config = _latent_config(encoder, env)
    path = visualize_latent(models, config, out)
    if mlflow:
        _log_latent_files(config, encoder, "visualize-latent", [path], {})
    typer.echo(f"latent picture: {path}")


def _log_latent_files(config: object, encoder: str, name: str, files: list[Path], metrics: dict) -> None:
    """One MLflow run holding an encoder's probe figures or picture, tagged with the encoder it describes."""
    import mlflow

    from frugalrl.tracking.runs import RunTracker

    with RunTracker(config, run_name=name) as tracker:
        mlflow.set_tag("frugalrl.encoder", encoder)
        tracker.log_metrics({k: v for k, v in metrics.items() if isinstance(v, int | float)}, step=0)
        for path in files:
            tracker.log_artifact(path, artifact_path="latent")
        typer.echo(f"MLflow run {tracker.run_id}")


@config_app.command("validate")
def config_validate(file: Path, overrides: SetOption = None) -> None:
    """Validate an experiment file and make its env once; prints the resolved config hash on success."""
    from frugalrl.config import load_config
    from frugalrl.envs.factory import check_env
    from frugalrl.evaluation import protocol_note

    cfg = load_config(file, overrides or [])
    check_env(cfg)  # what the run will need from its env and algorithm, checked now
    typer.echo(f"{file}: valid ({cfg.env.id}, {cfg.algo}, config hash {cfg.hash()})")
    if note := protocol_note(cfg.env, cfg.eval.episodes):
        typer.echo(note)


@config_app.command("show")
def config_show(file: Path, overrides: SetOption = None) -> None:
    """Print the resolved config (defaults filled in, overrides applied)."""
    from frugalrl.config import load_config

    typer.echo(load_config(file, overrides or []).to_yaml(), nl=False)


@app.command()
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
    from frugalrl.config import EnvConfig
    from frugalrl.evaluation import evaluate_policy
    from frugalrl.policy_store import load_policy

    policy = load_policy(model_uri)
    saved = EnvConfig.saved(policy.spec["env"])
    env_config = EnvConfig.model_validate(saved)
    if env is not None:
        from frugalrl.config import validate_config

        env_config = validate_config({"env": {**saved, "id": env}}, source="--env").env
        _same_spaces(EnvConfig.model_validate(saved), env_config)
    result = evaluate_policy(policy, env_config, episodes, seed, deterministic=not stochastic)
    if json_out:
        typer.echo(json.dumps({"env_id": env_config.id, **result.metrics(), "returns": result.returns}))
    else:
        typer.echo(
            f"{env_config.id}: mean {result.mean:.2f}  std {result.std:.2f}  IQM {result.iqm:.2f}  "
            f"95% CI [{result.ci_low:.2f}, {result.ci_high:.2f}]  ({episodes} episodes)"
        )
    if video is not None:
        from frugalrl.video import record_episode

        recorded = record_episode(policy, env_config, video, seed=seed)
        typer.echo(
            f"video: {recorded['path']} (episode from seed {seed}: return {recorded['episode_return']:.1f}, "
            f"{recorded['episode_steps']} steps, {recorded['frames']} frames)",
            err=json_out,  # --json keeps stdout one JSON document
        )


def _same_spaces(trained: Any, other: Any) -> None:
    """Refuse ``evaluate --env`` on an env whose observations or actions the policy cannot take."""
    from frugalrl.envs.factory import env_spaces

    (obs_a, act_a), (obs_b, act_b) = env_spaces(trained), env_spaces(other)
    if (
        obs_a.shape != obs_b.shape
        or type(act_a) is not type(act_b)
        or act_a.shape != act_b.shape
        or (getattr(act_a, "n", None) != getattr(act_b, "n", None))
    ):
        raise FrugalError(
            f"--env {other.id}: observations {obs_b.shape} and actions {act_b} do not fit a policy trained on "
            f"{trained.id} (observations {obs_a.shape}, actions {act_a}); evaluate it on an env with the same spaces"
        )


def _pipelines():  # noqa: ANN202 - returns the pipelines.local module
    """Import ``pipelines.local`` from the frugalrl checkout (the repo root holds pipelines/ and components/)."""
    import importlib

    candidates = [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parents[2]]
    if os.environ.get("FRUGALRL_HOME"):
        candidates.insert(0, Path(os.environ["FRUGALRL_HOME"]))
    for root in candidates:
        if (root / "pipelines" / "local.py").is_file() and (root / "components").is_dir():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            return importlib.import_module("pipelines.local")
    raise FrugalError(
        "pipeline commands need a frugalrl checkout (pipelines/, components/); "
        "run from the repository root or set FRUGALRL_HOME to it"
    )


ImageOption = Annotated[
    str | None, typer.Option("--image", help="The image every step runs, e.g. HOST:PORT/frugalrl@sha256:...")
]


@pipeline_app.command("compile")
def pipeline_compile(
    output: Annotated[Path, typer.Option("-o", "--output", help="IR YAML file to write.")] = Path("pipeline.yaml"),
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Compile the graph this config needs.")] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="The production DAG of a profile: quick, full, or a YAML path.")
    ] = None,
    image: ImageOption = None,
) -> None:
    """Compile a pipeline to Kubeflow IR YAML: a config's training pipeline, or a profile's production DAG.

    Every step names the image pushed last from this checkout, by digest, unless --image names another."""
    if config is not None and profile is not None:
        raise FrugalError("pass --config or --profile, not both")
    _check_output_file(output)
    pipelines = _pipelines()
    line = pipelines.image_line(image, profile)  # a bad --image fails before anything is written
    pipelines.compile_pipeline(output, config, profile, image)
    typer.echo(f"compiled: {output}")
    typer.echo(line)


def _check_output_file(output: Path) -> None:
    """The compiled IR is one YAML file: a folder or another suffix is refused before anything is built."""
    if output.is_dir():
        raise FrugalError(f"-o {output} is a folder; give the file to write, e.g. -o {output / 'pipeline.yaml'}")
    if output.suffix not in (".yaml", ".yml"):
        raise FrugalError(f"-o {output}: the compiled pipeline is YAML; give a path ending in .yaml")


def _compiled(config: Path | None, profile: str | None, package: Path | None, where: Path) -> Path:
    if sum(x is not None for x in (config, profile, package)) != 1:
        raise FrugalError("pass exactly one of --config, --profile or --package")
    if package is not None:
        if not package.is_file():
            raise FrugalError(f"--package {package} not found; compile one with `frugalrl pipeline compile`")
        return package
    return _pipelines().compile_pipeline(where, config, profile)


def _parameters(items: list[str] | None) -> dict:
    import yaml

    params = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FrugalError(f"--param {item!r}: expected KEY=VALUE, e.g. --param eval_episodes=20")
        params[key] = yaml.safe_load(value)
    return params


ParamOption = Annotated[list[str] | None, typer.Option("--param", help="A pipeline parameter: KEY=VALUE")]
HostOption = Annotated[str, typer.Option("--host", help="The KFP API server, e.g. http://localhost:8080")]


def _check_host(host: str) -> None:
    from urllib.parse import urlparse

    parsed = urlparse(host)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise FrugalError(f"--host {host!r} is not an http(s) URL of the KFP API; e.g. --host http://localhost:8080")


@pipeline_app.command("submit")
def pipeline_submit(
    host: HostOption,
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    profile: Annotated[str | None, typer.Option("--profile")] = None,
    package: Annotated[Path | None, typer.Option("--package", help="An already compiled IR YAML.")] = None,
    name: Annotated[str, typer.Option(help="The run's display name.")] = "frugalrl",
    params: ParamOption = None,
) -> None:
    """Start one run on a Kubeflow Pipelines cluster (compiles first unless --package)."""
    import tempfile

    _check_host(host)
    _pipelines()  # puts the checkout's pipelines/ on the path
    from pipelines.remote import submit

    with tempfile.TemporaryDirectory() as tmp:
        reply = submit(host, _compiled(config, profile, package, Path(tmp) / "p.yaml"), name, _parameters(params))
    typer.echo(f"run {reply.get('run_id', '?')} submitted to {host}")


@pipeline_app.command("schedule")
def pipeline_schedule(
    host: HostOption,
    cron: Annotated[str, typer.Option("--cron", help="Cron expression, 5 or 6 fields (KFP: seconds first).")],
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    profile: Annotated[str | None, typer.Option("--profile")] = None,
    package: Annotated[Path | None, typer.Option("--package", help="An already compiled IR YAML.")] = None,
    name: Annotated[str, typer.Option(help="The recurring run's display name.")] = "frugalrl-scheduled",
    params: ParamOption = None,
) -> None:
    """Create a recurring run on a Kubeflow Pipelines cluster."""
    import tempfile

    _check_host(host)
    _pipelines()
    from pipelines.remote import kfp_cron, schedule

    kfp_cron(cron)  # a bad expression fails before anything is compiled or sent
    with tempfile.TemporaryDirectory() as tmp:
        spec = _compiled(config, profile, package, Path(tmp) / "p.yaml")
        reply = schedule(host, spec, name, _parameters(params), cron)
    typer.echo(f"recurring run {reply.get('recurring_run_id', '?')} ({kfp_cron(cron)}) created on {host}")


@pipeline_app.command("run")
def pipeline_run(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Experiment YAML.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Run a profile's production DAG instead.")] = None,
    overrides: SetOption = None,
    model_name: Annotated[str | None, typer.Option(help="Registered model name; default <env>-policy.")] = None,
    root: Annotated[Path, typer.Option(help="Where kfp.local keeps step outputs.")] = Path("pipeline_runs"),
    isolated: Annotated[
        bool, typer.Option("--isolated", help="Run each stage as a cluster would: only its declared inputs.")
    ] = False,
    runner: Annotated[
        str, typer.Option("--runner", help="subprocess, or docker: every stage in a container of the step image.")
    ] = "subprocess",
    image: ImageOption = None,
) -> None:
    """Run a pipeline on this machine (kfp.local, MLflow sqlite by default)."""
    if (config is None) == (profile is None):
        raise FrugalError("pass --config FILE (a training pipeline) or --profile NAME (the production DAG)")
    if profile is not None and (overrides or model_name):
        raise FrugalError("--set and --model-name apply to --config; a profile sets them in its YAML (profiles/)")
    pipelines = _pipelines()
    if profile is not None:
        for line in pipelines.run_profile_local(profile, root, isolated=isolated, runner=runner, image=image):
            typer.echo(line)
        return
    result = pipelines.run_local(config, overrides or [], model_name=model_name, root=root, isolated=isolated,
                                 runner=runner, image=image)  # fmt: skip
    for line in result.lines():
        typer.echo(line)


@image_app.command("build")
def image_build(
    flavor: Annotated[str, typer.Option("--flavor", help="cpu (images/Dockerfile.cpu) or cuda.")] = "cpu",
    base: Annotated[
        str | None,
        typer.Option("--base", help="The base image, or debootstrap: Debian's, made here (no registry needed)."),
    ] = None,
    torch_spec: Annotated[str, typer.Option("--torch", help="The torch requirement.")] = "torch==2.13.0",
    pip_cert: Annotated[
        Path | None, typer.Option("--pip-cert", help="CA bundle for pip in the build (default: pip's `cert` here).")
    ] = None,
) -> None:
    """Build the step image from this checkout, tagged frugalrl:<version>-<commit>, through the Docker daemon."""
    from frugalrl.images import build_image

    record = build_image(_checkout(), flavor, base, torch_spec, pip_cert, progress=typer.echo)
    size = f"{record.size_bytes / 1e9:.2f} GB"
    typer.echo(f"built {record.tag} ({record.image_id[:19]}, {size}) in {record.build_s:.0f} s")
    typer.echo(f"push it: frugalrl image push --registry HOST:PORT;  try it: docker run --rm {record.tag} check")


@image_app.command("push")
def image_push(
    registry: Annotated[str, typer.Option("--registry", help="HOST:PORT of the registry, e.g. 127.0.0.1:5000.")],
    flavor: Annotated[str, typer.Option("--flavor", help="Which build to push: cpu or cuda.")] = "cpu",
) -> None:
    """Push the last build to a registry; compiled pipelines then name it by digest."""
    from frugalrl.images import push_image

    record = push_image(_checkout(), registry, flavor, progress=typer.echo)
    typer.echo(f"pushed: {record.pinned}")


def _checkout() -> Path:
    """The frugalrl checkout image commands build from (the current directory or FRUGALRL_HOME)."""
    _pipelines()
    import pipelines

    return Path(pipelines.__file__).resolve().parent.parent


@app.command()
def sync(run_dir: Annotated[Path, typer.Argument(help="A run directory (the --out of train).")]) -> None:
    """Send what a run kept while its MLflow store was away; mark a run that was killed KILLED."""
    from frugalrl.tracking.offline import sync_run_dir

    typer.echo(sync_run_dir(run_dir))


@app.command()
def check(
    benchmark_mode: Annotated[bool, typer.Option("--benchmark-mode", help="Add a short hardware probe.")] = False,
) -> None:
    """What works on this machine: torch, ALE, MuJoCo, Box2D, MLflow, kfp."""
    from frugalrl.doctor import print_report, run_checks

    results = run_checks(benchmark_mode)
    print_report(results)
    if any(not r.ok for r in results):
        raise typer.Exit(1)


LIST_OPTIONS = ("--games",)  # options that take several values after one flag, as users type lists


def spread_list_options(argv: list[str]) -> list[str]:
    """``--games A B`` -> ``--games A --games B`` (Click options take one value per flag)."""
    out: list[str] = []
    flag, taken = None, 0
    for arg in [*argv, None]:
        if flag and arg is not None and not arg.startswith("-"):
            out += [flag, arg]
            taken += 1
            continue
        if flag and not taken:
            out.append(flag)  # no value: Click says the option needs one
        flag, taken = (arg, 0) if arg in LIST_OPTIONS else (None, 0)
        if arg is not None and flag is None:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the command; returns on success, exits non-zero otherwise (2 for bad input, 130 for Ctrl-C).

    Click runs outside its standalone mode so that every way out passes here: a usage error is
    one line (not a usage box), Ctrl-C is a message and 130 (Click would print "Aborted!", exit 1).
    """
    import logging

    # MLflow's INFO lines ("Creating initial MLflow database tables...") are not the user's business:
    # the variable covers an import still to come, the level one that already happened
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"])
    try:
        code = app(args=spread_list_options(sys.argv[1:] if argv is None else argv), prog_name="frugalrl",
                   standalone_mode=False)  # fmt: skip
    except typer.TyperException as exc:  # bad arguments or options (typer's public base of its usage errors)
        command = " ".join(exc.ctx.command_path.split()[1:]) if getattr(exc, "ctx", None) else ""
        print(f"error: {exc.format_message()} (see: frugalrl {command} --help)".replace("  ", " "), file=sys.stderr)
        sys.exit(exc.exit_code)
    except FrugalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        fix = "free space or fix the permissions, then run again (finished files are kept; a run goes on with --resume)"
        print(f"error: {exc.strerror}{where}; {fix}", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    if code == 130:  # typer (0.16 and later) turns Ctrl-C into this return code, silently
        print(INTERRUPTED, file=sys.stderr)
    if isinstance(code, int) and code != 0:
        sys.exit(code)


if __name__ == "__main__":
    main()
