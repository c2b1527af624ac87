"""The pipeline steps as plain functions: paths and values in, dicts out.

Each Kubeflow component in ``components/`` is a thin adapter around exactly one of these,
so every step can also run, and be tested, without Kubeflow. In a step process (kfp's executor), a
``FrugalError`` that ends the step is printed as its one line, as the CLI prints it; a bug keeps its traceback.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from frugalrl import pretraining
from frugalrl.config import ExperimentConfig, config_from_yaml_text, load_config
from frugalrl.credentials import shown
from frugalrl.errors import ConfigError, FrugalError, PipelineFailed, TrackingError
from frugalrl.evaluation import evaluate_policy, random_policy_returns, scoring_protocol
from frugalrl.fusion.jobs import distributed_manifest, submit_job
from frugalrl.fusion.trainjob import TRACKING_SECRET
from frugalrl.ops.report import Branch, RunInput, build_report
from frugalrl.ops.video import record_episode
from frugalrl.peft.compare import compare
from frugalrl.policy_store import load_policy_file, registered_policy_file
from frugalrl.pretraining import PretrainStage
from frugalrl.race.runs import ROWS_FILE, RUN_SETS, run_row
from frugalrl.race.table import write as write_race
from frugalrl.race.verdict import judge
from frugalrl.tracking.artifacts import resolve_artifact
from frugalrl.tracking.models import model_card
from frugalrl.tracking.provenance import PIPELINE_RUN_ENV, pretrained_inputs
from frugalrl.tracking.registry import gate_promotion, register_model
from frugalrl.tracking.store import TRACKING_SECRET_ENV, check_tracking
from frugalrl.training import train
from frugalrl.tuning import best_overrides, tune

STEP_MAIN = "executor_main.py"  # kfp.dsl.executor_main: what every pipeline step's process runs


def one_line_errors() -> None:
    """Print an uncaught ``FrugalError`` as ``error: MESSAGE`` (one line, no traceback); others as before."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if isinstance(error, FrugalError):
            print(f"error: {shown(str(error))}", file=sys.stderr, flush=True)
        else:
            previous(kind, error, trace)

    sys.excepthook = hook


if Path(sys.argv[0] if sys.argv else "").name == STEP_MAIN:  # imported by a step's component function
    one_line_errors()


def _pretraining(config: ExperimentConfig, stage: str) -> PretrainStage:
    """The stage named ``stage``, else the one the config needs (``frugalrl.pretraining``)."""
    found = pretraining.stage(stage) if stage else pretraining.needed_by(config)
    if found is None:
        raise ConfigError(f"config {config.name} needs no pretraining stage; known: {', '.join(pretraining.stages())}")
    return found


def _with_pretrained(config_yaml: str, overrides: list[str], pretrained: str, stage: str) -> list[str]:
    """``overrides`` and, with ``pretrained``, the stage's override pointing the config at it, where the config
    with ``overrides`` needs that stage (a race's winner may not: plain PPO against the pivot it was raced with)."""
    if not pretrained:
        return overrides
    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    needed = pretraining.needed_by(config)
    if needed is None or (stage and needed.name != stage):
        return overrides
    return [*overrides, _pretraining(config, stage).point_at(pretrained)]


def train_step(
    config_yaml: str,
    overrides: list[str],
    out_dir: str,
    pipeline_run_id: str = "none",
    pretrained: str = "",
    stage: str = "",
) -> dict[str, Any]:
    """Train from config text; the run directory is ``out_dir``. Returns summary.json's content.

    ``pretrained``: what pretraining stage ``stage`` produced (a directory); its declared override
    points the run at it (``selection.settings.evaluator_from``, ``latent.encoder_from``), after ``overrides``."""
    overrides = _with_pretrained(config_yaml, overrides, pretrained, stage)
    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    return train(config, out_dir, interactive=False, pipeline_run_id=pipeline_run_id)


def race_run_step(
    config_yaml: str,
    overrides: list[str],
    contender: str,
    seed: int,
    cpu_budget_s: float,
    out_dir: str,
    pretrained: str = "",
    stage: str = "",
) -> dict[str, Any]:
    """One run of a race: ``contender`` (its changes already in ``overrides``) on ``seed``, stopped at
    ``cpu_budget_s`` CPU-seconds of this step's process, one thread, tracking off; its row (``frugalrl.race``).
    ``pretrained``/``stage``: as ``train_step``, used where the contender's config needs that stage."""
    sets = [*overrides, *RUN_SETS, f"seed={seed}", f"cpu_budget_s={cpu_budget_s}"]
    pointed = _with_pretrained(config_yaml, sets, pretrained, stage)
    config = config_from_yaml_text(config_yaml, pointed, source="pipeline config")
    start = time.perf_counter()
    train(config, out_dir, interactive=False)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s, wall_s = usage.ru_utime + usage.ru_stime, time.perf_counter() - start
    return run_row(contender, seed, Path(out_dir), cpu_s, wall_s, len(pointed) > len(sets), f"{contender}-seed{seed}")


def race_decision_step(race: dict[str, Any], rows: list[dict[str, Any]], out_dir: str,
                       pipeline_run_id: str = "none") -> dict[str, Any]:  # fmt: skip
    """The race's decision from every run's row: ``table.md``, ``decision.json``, ``race.png`` and ``rows.jsonl``
    in ``out_dir``, and (with tracking on in the raced config) an MLflow run holding them; returns the
    decision (``winner``, ``overrides``: what the training stage adds, ``table``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["seed"], [c["name"] for c in race["contenders"]].index(r["contender"])))
    (out / ROWS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts, winner, bar = judge(rows, [c["name"] for c in race["contenders"]])
    decision = write_race(out, race, verdicts, winner, bar, rows)
    decision["overrides"] = next(c["overrides"] for c in race["contenders"] if c["name"] == winner)
    config = config_from_yaml_text(race["config_yaml"], race["sets"], source="pipeline config")
    if config.tracking.enabled:
        import mlflow

        mlflow.set_tracking_uri(check_tracking())
        mlflow.set_experiment(config.tracking.experiment)
        with mlflow.start_run(run_name=f"race-{config.name}", tags={"frugalrl.pipeline_run_id": pipeline_run_id,
                                                                   "frugalrl.kind": "race"}) as run:  # fmt: skip
            mlflow.log_params({"contenders": ",".join(c["name"] for c in race["contenders"]), "winner": winner,
                               "cpu_budget_s": race["cpu_budget_s"], "seeds": len(race["seeds"]),
                               "config": race["config"]})  # fmt: skip
            for verdict in verdicts:
                mlflow.log_metric(f"iqm.{verdict.name}", verdict.iqm[0])
            for path in sorted(out.iterdir()):
                mlflow.log_artifact(str(path), artifact_path="race")
        decision["mlflow_run_id"] = run.info.run_id
    return decision


# What a training step reports as metrics, where its summary has them (curriculum runs add stage<i>_steps).
TRAINING_METRICS = ("eval_mean", "eval_std", "eval_iqm", "real_env_steps", "virtual_env_steps", "train_flops",
                    "wall_s", "peak_rss_mb")  # fmt: skip


def training_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The numbers of a training summary a pipeline shows beside the run (KFP Metrics)."""
    picked = {key: summary[key] for key in TRAINING_METRICS if summary.get(key) is not None}
    picked.update({k: v for k, v in summary.items() if k.startswith("stage") and k.endswith("_steps")})
    return {key: float(value) for key, value in picked.items()}


def collect_step(config_yaml: str, overrides: list[str], dataset_path: str, stage: str = "") -> dict[str, Any]:
    """The data pretraining stage ``stage`` (default: the one the config needs) trains on, saved at
    ``dataset_path``: e.g. game frames for the latent curriculum, labelled PPO rollouts for PivotRL."""
    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    return pretraining.collect(_pretraining(config, stage), config, Path(dataset_path))


def pretrain_step(
    config_yaml: str, overrides: list[str], dataset_path: str, out_dir: str, stage: str = ""
) -> dict[str, Any]:
    """Train (and register) what stage ``stage`` produces on a collected dataset; ``out_dir`` holds it.

    The summary gains ``metrics``: the numbers the stage declares worth showing, where present."""
    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    found = _pretraining(config, stage)
    summary = pretraining.pretrain(found, config, Path(out_dir), Path(dataset_path))
    metrics = {key: float(summary[key]) for key in found.metrics if summary.get(key) is not None}
    return {**summary, "metrics": metrics}


def peft_compare_step(
    config_yaml: str, overrides: list[str], base_run_dir: str, out_dir: str, pipeline_run_id: str = "none"
) -> dict[str, Any]:
    """The PEFT comparison from the trained source run ``base_run_dir``; ``out_dir/best`` is the best
    adapted policy, a run directory the evaluate and register steps read like any other."""
    config = config_from_yaml_text(config_yaml, [*overrides, f"peft.source={base_run_dir}"], source="pipeline config")
    return compare(config, Path(out_dir), pipeline_run_id=pipeline_run_id)


def train_distributed_step(
    config_yaml: str,
    overrides: list[str],
    out_dir: str,
    pipeline_run_id: str,
    namespace: str,
    image: str,
    node_selector: dict,
    toleration: dict,
    job_kind: str = "TrainJob",
) -> dict[str, Any]:
    """Train on ``distributed.workers`` pods as a ``job_kind`` (a Kubeflow Trainer TrainJob, or the legacy
    PyTorchJob); ``out_dir`` gets the rank-0 run's files.

    The master logs to MLflow as any run does; its ``run/`` artifacts (summary, config, policy)
    are fetched back, so evaluation and registration downstream read the same run directory.
    """
    import re

    import mlflow

    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    name = re.sub(r"[^a-z0-9-]", "-", f"{config.name}-{pipeline_run_id}".lower())[:63].strip("-")
    manifest = distributed_manifest(
        job_kind, name, f"{name}-config", config.distributed.workers, image,
        node_selector=node_selector, tolerations=[toleration], env={PIPELINE_RUN_ENV: pipeline_run_id},  # pods read it
        secret=os.environ.get(TRACKING_SECRET_ENV) or TRACKING_SECRET,  # the Secret this step's own tracking came from
    )  # fmt: skip
    submit_job(manifest, config.to_yaml(), namespace)
    mlflow.set_tracking_uri(check_tracking())
    runs = mlflow.search_runs(
        experiment_names=[config.tracking.experiment],
        filter_string=f"tags.`frugalrl.pipeline_run_id` = '{pipeline_run_id}' and tags.`frugalrl.config_hash` = "
        f"'{config.hash()}'",
        order_by=["start_time DESC"],
        max_results=1,
        output_format="list",
    )
    if not runs:
        raise PipelineFailed(f"{job_kind} {name} finished but logged no MLflow run; check its rank-0 log")
    run_id = runs[0].info.run_id
    resolve_artifact(
        f"runs:/{run_id}/run", None, "run", "check its rank-0 log", dest=Path(out_dir),
        fetch_error=lambda reason: f"{job_kind} {name}: cannot fetch run {run_id}'s run/ artifacts ({reason[:160]})",
    )  # fmt: skip
    for path in (Path(out_dir) / "run").iterdir():
        path.rename(Path(out_dir) / path.name)
    return json.loads((Path(out_dir) / "summary.json").read_text())


def _study_per_pipeline_run(config_yaml: str, overrides: list[str], pipeline_run_id: str) -> ExperimentConfig:
    """The config, with one study per pipeline run (``<name>-<run id>``) unless it names its own:
    a re-run of the pipeline tunes afresh instead of finding the last run's study already finished."""
    config = config_from_yaml_text(config_yaml, overrides, source="pipeline config")
    if config.tuning is not None and config.tuning.study_name is None and pipeline_run_id != "none":
        tuning = config.tuning.model_copy(update={"study_name": f"{config.name}-{pipeline_run_id}"})
        config = config.model_copy(update={"tuning": tuning})
    return config


def tune_step(
    config_yaml: str,
    overrides: list[str],
    out_dir: str,
    worker: int,
    pipeline_run_id: str = "none",
    pretrained: str = "",
    stage: str = "",
) -> dict[str, Any]:
    """One tuning worker: its share of the study that every worker shares (``OPTUNA_STORAGE``).

    ``pretrained``/``stage``: as ``train_step``; every trial starts from what the stage produced."""
    overrides = _with_pretrained(config_yaml, overrides, pretrained, stage)
    config = _study_per_pipeline_run(config_yaml, overrides, pipeline_run_id)
    return tune(config, Path(out_dir), worker, pipeline_run_id=pipeline_run_id)


def tune_best_step(config_yaml: str, overrides: list[str], pipeline_run_id: str = "none") -> list[str]:
    """The best finished trial's overrides, read back from the shared study."""
    return best_overrides(_study_per_pipeline_run(config_yaml, overrides, pipeline_run_id))


def evaluate_step(run_dir: str, episodes: int, seed: int, deterministic: bool = True) -> dict[str, Any]:
    """Evaluate the policy a run directory registers over fixed seeds (with ``eval.policy: best``,
    ``best_policy.pt``: ``register_step`` registers that one too, as its ``model_uri``)."""
    policy, config = load_policy_file(registered_policy_file(Path(run_dir)))
    result = evaluate_policy(policy, config.env, episodes, seed, deterministic)
    return {"env_id": config.env.id, **result.metrics(), "returns": result.returns}


def register_step(run_dir: str, model_name: str, eval_returns: list[float], eval_seed: int) -> dict[str, Any]:
    """Register the run's logged policy as ``challenger``; the promotion gate decides whether it becomes ``champion``.

    ``eval_returns`` are the per-episode returns of the evaluation over seeds ``eval_seed + i``;
    the gate (``promotion`` in the run's config) compares them with the champion's on the same seeds.
    """
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    model_uri, run_id = summary.get("model_uri"), summary.get("mlflow_run_id")
    if not model_uri or not run_id:
        raise TrackingError(f"run {run_dir} logged no MLflow model; train with tracking.enabled and tracking.log_model")
    eval_mean = sum(eval_returns) / len(eval_returns)
    config = load_config(Path(run_dir) / "config.yaml")
    lineage = {"frugalrl.config_hash": summary["config_hash"], "frugalrl.git_commit": summary["git_commit"]}
    lineage.update(pretrained_inputs(config))  # which encoder / evaluator trained this policy
    lineage.update(summary.get("lineage", {}))  # e.g. an adapted policy's source policy and PEFT method

    # The task's floor on the same seeds: what a first version must beat, and a scale for every score.
    random = random_policy_returns(config.env, len(eval_returns), eval_seed).returns
    lineage["frugalrl.random_mean"] = f"{sum(random) / len(random):.4f}"
    lineage["frugalrl.env_id"] = config.env.id
    if protocol := scoring_protocol(config.env):  # Atari: how the score was played (full games, ...)
        lineage["frugalrl.protocol"] = protocol
        lineage["frugalrl.fire_reset"] = str(config.env.atari.fire_reset).lower()
    if config.env.dynamics.changed:  # the task it plays is not the stock env: say how, for plain-gymnasium users
        lineage["frugalrl.env_dynamics"] = json.dumps(config.env.dynamics.model_dump(mode="json"))
    protocol = f"mean return of {len(eval_returns)} episodes, episode i from seed {eval_seed} + i"
    if scoring_protocol(config.env):
        protocol += f", {scoring_protocol(config.env)} Atari games"
    description, card = model_card(config.env.model_dump(mode="json"), config.algo, run_id, protocol)
    lineage.update(card)
    version = register_model(model_uri, model_name, run_id, eval_mean, "eval_mean", tags=lineage,
                             description=description)  # fmt: skip
    decision = gate_promotion(model_name, version, run_id, eval_returns, eval_seed, config.promotion, lambda: random)
    return {"model_name": model_name, "version": version, "model_uri": model_uri, **decision}


def report_step(branches: list[dict[str, Any]], out_html: str) -> dict[str, Any]:
    """Write the pipeline's HTML report; log it to the first run's MLflow run, each episode to its policy's.

    A branch is ``{"runs": {label: run_dir}, "decisions": [markdown], "peft_dir": dir, "title": str, "race":
    markdown}``; all but ``runs`` are optional (the title defaults to the task and its techniques).
    """
    sections, recorded = [], []
    for spec in branches:
        inputs = [RunInput(label, Path(path)) for label, path in spec["runs"].items()]
        peft_dir = Path(spec["peft_dir"]) if spec.get("peft_dir") else None
        videos = record_videos(inputs, Path(out_html).parent / "videos")
        recorded += videos
        sections.append(Branch(spec.get("title") or branch_title(inputs, peft_dir), inputs,
                               list(spec.get("decisions", [])), peft_dir,
                               [(caption, video) for _, caption, video in videos],
                               spec.get("race", "")))  # fmt: skip
    Path(out_html).write_text(build_report(sections))
    runs = [run for branch in sections for run in branch.runs]
    run_id = runs[0].summary.get("mlflow_run_id") if runs else None
    if run_id or any(run.summary.get("mlflow_run_id") for run in runs):
        import mlflow

        mlflow.set_tracking_uri(check_tracking())
        if run_id:
            with mlflow.start_run(run_id=run_id):
                mlflow.log_text(Path(out_html).read_text(), "report/report.html")  # kfp's file has no extension
        for run, _, video in recorded:  # each episode next to its policy's run
            if isinstance(video, Path) and run.summary.get("mlflow_run_id"):
                with mlflow.start_run(run_id=run.summary["mlflow_run_id"]):
                    mlflow.log_artifact(str(video), artifact_path="video")
    return {"html": out_html, "mlflow_run_id": run_id}


def branch_title(runs: list[Any], peft_dir: Path | None = None) -> str:
    """'<env id>: <techniques>' from the branch's runs (PEFT transfer when it has a PEFT table)."""
    summaries = [run.summary for run in runs]
    env_id = next((s["env_id"] for s in summaries if s.get("env_id")), "pipeline")
    techniques = sorted({t for s in summaries for t in (s.get("techniques") or [])} - {"latent_pretrain"})
    if peft_dir is not None:
        techniques.append("PEFT transfer")
    algos = sorted({s["algo"].upper() for s in summaries if s.get("algo") and s["algo"] != "latent_pretrain"})
    return f"{env_id}: {' + '.join(algos) or 'policy'}" + (f" with {', '.join(techniques)}" if techniques else "")


def record_videos(runs: list[Any], out_dir: Path, seed: int = 10_000) -> list[tuple[Any, str, Path | str]]:
    """(run, caption, GIF or the one-line reason there is none) for each run that holds a policy."""
    videos: list[tuple[Any, str, Path | str]] = []
    for run in runs:
        if not (run.directory / "policy.pt").is_file():
            continue
        try:
            policy, config = load_policy_file(run.directory)
            path = out_dir / f"{re.sub(r'[^A-Za-z0-9_-]+', '-', run.label)}.gif"
            recorded = record_episode(policy, config.env, path, seed=seed)
            caption = f"{run.label}: episode from seed {seed}, return {recorded['episode_return']:.1f}"
            videos.append((run, caption, path))
        except FrugalError as exc:  # no GL for MuJoCo, say: the report says so instead of failing
            videos.append((run, run.label, str(exc)))
    return videos


def _maybe(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def registration_markdown(result: dict[str, Any]) -> str:
    """A short Markdown record of a registration decision."""
    verdict = "promoted to **champion**" if result["promoted"] else "kept as **challenger**"
    return (
        f"# {result['model_name']} version {result['version']}\n\n"
        f"- decision: {verdict}\n"
        f"- reason: {result['reason']}\n"
        f"- challenger eval mean: {result['challenger_score']:.2f}\n"
        f"- champion eval mean before: {_maybe(result['champion_score'])}\n"
        + (
            f"- random policy eval mean (same seeds): {_maybe(result['random_score'])}\n"
            if result.get("random_score") is not None
            else ""
        )
        + f"- champion version now: {result['champion_version'] or 'none yet'}\n"
        + (
            "- what this means: no version has beaten the random policy yet; at this budget the run "
            "demonstrates the machinery, not a trained policy\n"
            if not result["champion_version"]
            else ""
        )
        + f"- logged model: `{result['model_uri']}`\n"
    )
