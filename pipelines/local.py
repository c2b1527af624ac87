"""Compile the pipeline to IR YAML, or run it here with kfp.local (the embedded default)."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frugalrl.pipelines.console import StageConsole, stage_names
from frugalrl.pipelines.containers import check_runner, docker_runner, pinned_image, resolve_image
from frugalrl.pipelines.training import pipeline_for, pipeline_kind
from kfp import compiler, local

from frugalrl.config import load_config
from frugalrl.credentials import redact_text, shown
from frugalrl.errors import PipelineFailed
from frugalrl.ops.images import ImageError, is_pinned
from frugalrl.tracking import check_tracking, registry_client, task_name, tracking_uri


def compile_pipeline(
    output: Path,
    config_path: Path | None = None,
    profile: str | None = None,
    image: str | None = None,
    cuda_image: str | None = None,
    allow_unpinned: bool = False,
) -> list[str]:
    """Write Kubeflow IR YAML for a cluster: the production DAG of ``profile``, or the training pipeline
    ``config_path`` needs (the plain one without either); returns what to print of its images.

    Every step names ``image`` (``--image REF``, else the checkout's last pushed CPU build); a profile's GPU
    steps name ``cuda_image`` (else the last pushed CUDA build). Each must name a registry and a digest,
    or the compile stops with one line before anything is written; ``allow_unpinned`` lets a tag through
    for a dev cluster, and the compiled pipeline's description then says so."""
    gpu = False
    if profile is not None:
        from frugalrl.pipelines.production import build_pipeline, load_profile

        loaded = load_profile(profile)
        pipeline, gpu = build_pipeline(loaded), bool(loaded.gpu_stages())
    else:
        pipeline = pipeline_for(pipeline_kind(load_config(config_path)) if config_path else "plain")
    cpu = _cluster_image(image, "cpu", "--image", allow_unpinned)
    cuda = _cluster_image(cuda_image, "cuda", "--cuda-image", allow_unpinned) if gpu else None
    unpinned = [ref for ref, *_ in filter(None, (cpu, cuda)) if not is_pinned(ref)]
    output.parent.mkdir(parents=True, exist_ok=True)
    with pinned_image(pipeline, *cpu[:2], cuda=cuda[:2] if cuda else None), _described(pipeline, unpinned):
        compiler.Compiler().compile(pipeline, str(output))
    lines = [f"image: {cpu[0]} (from {cpu[2]})"]
    if cuda:
        lines.append(f"GPU steps' image: {cuda[0]} (from {cuda[2]})")
    if unpinned:
        lines.append(f"not pinned (--allow-unpinned; for a dev cluster only): {', '.join(unpinned)}")
    return lines


def _cluster_image(image: str | None, flavor: str, option: str, allow_unpinned: bool) -> tuple[str, str, str]:
    """(reference, digest, source) of the image a cluster pulls for ``flavor``, or one line saying why not."""
    resolved = resolve_image(image, flavor, option=option)
    if resolved is None:
        raise ImageError(
            f"no {flavor} image to name: a cluster pulls the step image from a registry by digest; build and push "
            f"it (`frugalrl image build --flavor {flavor}`, `frugalrl image push --registry HOST:PORT --flavor "
            f"{flavor}`) or pass {option} HOST/frugalrl@sha256:..."
        )
    if not (allow_unpinned or is_pinned(resolved[0])):
        raise ImageError(
            f"{flavor} image {resolved[0]} (from {resolved[2]}) is not pinned: a cluster needs a registry and a "
            f"digest; push it (`frugalrl image push --registry HOST:PORT --flavor {flavor}`), pass {option} "
            "HOST/frugalrl@sha256:..., or --allow-unpinned for a dev cluster"
        )
    return resolved


@contextlib.contextmanager
def _described(pipeline: Any, unpinned: list[str]) -> Any:
    """While open, the pipeline's description says which of its images are not pinned (none: unchanged)."""
    info = pipeline.pipeline_spec.pipeline_info
    saved = info.description
    if unpinned:
        info.description = f"{saved} [NOT PINNED, dev clusters only: {', '.join(unpinned)}]"
    try:
        yield
    finally:
        info.description = saved


@dataclass
class LocalRunResult:
    model_name: str
    version: str
    tracking_uri: str
    pipeline_root: Path
    eval_mean: float

    def lines(self) -> list[str]:
        return [
            f"registered {self.model_name} version {self.version} (eval mean {self.eval_mean:.2f})",
            f"step outputs: {self.pipeline_root}",
            f"MLflow store: {shown(self.tracking_uri)}  (open it: mlflow ui --backend-store-uri "
            f"{shown(self.tracking_uri)})",
            _champion_line(registry_client(), self.model_name),
        ]


def run_local(
    config_path: Path,
    overrides: list[str],
    model_name: str | None = None,
    root: Path = Path("pipeline_runs"),
    isolated: bool = False,
    runner: str = "subprocess",
    image: str | None = None,
) -> LocalRunResult:
    """Run the pipeline on this machine with kfp.local, MLflow sqlite by default: every step a
    subprocess of this Python (``runner="subprocess"``) or a container of the step image (``"docker"``)."""
    config = load_config(config_path, overrides)  # fail fast on a bad config, before any step starts
    uri = check_tracking(tracking_uri())
    step_image = check_runner(runner, isolated, image, uri, root)
    os.environ["MLFLOW_TRACKING_URI"] = uri  # steps run as subprocesses, possibly in other directories
    name = model_name or f"{task_name(config.env.id)}-policy"
    kind = pipeline_kind(config)
    extra = {"adapted_model_name": f"{name}-adapted"} if kind == "peft" else {}
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    if isolated:
        _pin_artifact_root(uri, [config.tracking.experiment])
    run = _run(pipeline_for(kind), root, f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}.log", isolated,
               step_image, config_yaml=redact_text(config_path.read_text()),
               overrides=[redact_text(o) for o in overrides], model_name=name,
               eval_episodes=config.eval.episodes, eval_seed=config.eval.seed, **extra)  # fmt: skip
    version = str(run.output)
    from frugalrl.tracking import registry_client

    tags = registry_client().get_model_version(name, version).tags
    return LocalRunResult(name, version, uri, root, float(tags.get("frugalrl.score", "nan")))


def run_profile_local(
    profile_name: str,
    root: Path = Path("pipeline_runs"),
    eval_episodes: int = 10,
    isolated: bool = False,
    runner: str = "subprocess",
    image: str | None = None,
) -> list[str]:
    """Run a profile's production DAG here (kfp.local); returns what to print: champions, report, MLflow UI.

    ``isolated``: every stage in its own directory with only its declared inputs (``pipelines.isolated``).

    The tune workers share one study in ``OPTUNA_STORAGE``, else the train stage's ``tuning.storage``,
    else a sqlite file under ``root``.
    """
    from frugalrl.pipelines.production import build_pipeline, load_profile

    started = time.perf_counter()
    profile = load_profile(profile_name)  # validates every stage's config before any step starts
    uri = check_tracking(tracking_uri())
    step_image = check_runner(runner, isolated, image, uri, root)
    os.environ["MLFLOW_TRACKING_URI"] = uri
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    tuning = profile.stage_config(profile.train).tuning if profile.train and profile.tune.workers else None
    if not (tuning and tuning.storage):  # the train stage's own storage, when it names one, is the study's
        os.environ.setdefault("OPTUNA_STORAGE", f"sqlite:///{root / 'optuna.db'}")
    if isolated:
        stages = [s for s in (profile.train, profile.latent, profile.peft) if s is not None]
        _pin_artifact_root(uri, sorted({profile.stage_config(s).tracking.experiment for s in stages}))
    stamp = f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    log = f"{stamp}.log"
    _run(build_pipeline(profile), root, log, isolated, step_image, eval_episodes=eval_episodes)
    client = registry_client()
    lines = [f"done in {(time.perf_counter() - started) / 60:.1f} min"]
    for stage in (profile.train, profile.latent, profile.peft):
        if stage is None:
            continue
        names = [stage.model_name]
        if stage is profile.peft:
            names.append(stage.adapted_name)
        lines.extend(_champion_line(client, name) for name in names)
    reports = sorted(root.rglob("report/html"), key=lambda p: p.stat().st_mtime)  # kfp names the artifact's file
    if reports:  # beside the run's log, with the extension a browser opens it by
        shutil.copyfile(reports[-1], root / f"{stamp}-report.html")
    lines.append(f"report: {root / f'{stamp}-report.html' if reports else 'not written'}")
    ui = f"open {uri}" if uri.startswith("http") else f"mlflow ui --backend-store-uri {uri}"
    lines.append(f"MLflow UI: {ui}")
    return lines


def _champion_line(client: Any, name: str) -> str:
    """``models:/NAME@champion`` with its score, and what became of the version this run registered."""
    newest = max(client.search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))
    try:
        champion = client.get_model_version_by_alias(name, "champion")
    except Exception:  # MLflow raises on a missing alias: no version has earned it
        reason = newest.tags.get("frugalrl.promotion", "no decision recorded")
        return (f"no champion for {name}: version {newest.version} kept as challenger{_scale(newest)}; this "
                f"budget demonstrates the machinery, not a trained policy ({reason})")  # fmt: skip
    score = champion.tags.get("frugalrl.score", "nan")
    verdict = "promoted" if champion.version == newest.version else "kept as challenger"
    return (f"champion: models:/{name}@champion (version {champion.version}, eval mean {float(score):.1f}"
            f"{_scale(champion)}); this run's version {newest.version}: {verdict}")  # fmt: skip


def _scale(version: Any) -> str:
    """``; random 17.9, solved 475`` : the task's floor (same seeds) and gymnasium's solved threshold."""
    import gymnasium as gym

    parts = []
    if "frugalrl.random_mean" in version.tags:
        parts.append(f"random {float(version.tags['frugalrl.random_mean']):.1f}")
    env_id = version.tags.get("frugalrl.env_id")
    threshold = gym.spec(env_id).reward_threshold if env_id and env_id in gym.registry else None
    parts.append(f"solved {threshold:g}" if threshold is not None else "no solved score")
    return "; " + ", ".join(parts)


def _pin_artifact_root(uri: str, experiments: list[str]) -> None:
    """A local store keeps artifacts under ``./mlruns`` of the process that creates the experiment;
    an isolated stage's directory is deleted after it. Create the experiments first, with their
    artifacts under this directory's ``mlruns``, as a run without ``--isolated`` would have them."""
    if uri.startswith(("http://", "https://")):
        return  # a server has its own artifact store
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    for name in experiments:
        if client.get_experiment_by_name(name) is None:
            client.create_experiment(name, artifact_location=(Path.cwd() / "mlruns").resolve().as_uri())


@contextlib.contextmanager
def _isolation(enabled: bool) -> Any:
    """While enabled, kfp.local runs every stage's command through ``pipelines.isolated``'s sandbox."""
    if not enabled:
        yield
        return
    from frugalrl.pipelines.isolated import isolated_command
    from kfp.local import subprocess_task_handler as handler

    original = handler.run_local_subprocess
    handler.run_local_subprocess = lambda full_command, env_vars=None: original(
        isolated_command(full_command), env_vars
    )
    try:
        yield
    finally:
        handler.run_local_subprocess = original


def _runner(pipeline: Any, root: Path, isolated: bool, image: tuple[str, str] | None) -> tuple[Any, Any, str]:
    """kfp.local's runner (``image``: the step image's reference and digest, from ``check_runner``),
    the context a run happens in, and what the first line says of it."""
    if image is None:
        return local.SubprocessRunner(use_venv=False), _isolation(isolated), (
            " (isolated: each stage sees only its declared inputs)" if isolated else "")  # fmt: skip
    return docker_runner(root), pinned_image(pipeline, *image), f" (in containers of {image[0]})"


def _run(pipeline: Callable[..., Any], root: Path, log_name: str, isolated: bool = False,
         image: tuple[str, str] | None = None, **arguments: Any) -> Any:  # fmt: skip
    """Run ``pipeline`` with kfp.local under ``root``: a line per stage on the console, kfp.local's full
    output in ``root/log_name``; ``isolated``: each stage sees only its declared inputs; ``image``:
    (reference, digest) to run every stage in a container of (``check_runner``), else subprocesses."""
    task_runner, context, mode = _runner(pipeline, root, isolated, image)
    local.init(runner=task_runner, pipeline_root=str(root))
    names, total = stage_names(pipeline)
    log = root / log_name
    print(f"running {pipeline.name}: {total} stages{mode}; full log: {log}", flush=True)
    with warnings.catch_warnings(), StageConsole(log, names, total), context:
        warnings.filterwarnings("ignore", message=".*non-Python base image.*")
        warnings.filterwarnings("ignore", message=".*have no effect in the current local runner.*")
        try:
            return pipeline(**arguments)
        except RuntimeError as exc:  # kfp.local reports a failed task this way
            raise PipelineFailed(f"{str(exc).splitlines()[0]}; its output is in {log}") from None
