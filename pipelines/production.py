"""The production DAG, built from a profile (``profiles/quick.yaml``, ``profiles/full.yaml``).

    [race: contenders x seeds (ParallelFor) -> decision] ->
    [collect -> pretrain] -> tune workers (ParallelFor, one study) -> best trial
        -> train (the race's winner, tuned, on what was pretrained) -> evaluate -> register (promotion gate)
    [collect -> pretrain] -> curriculum training -> evaluate -> register          (the latent section)
    train source (SAC) -> evaluate -> register;  -> PEFT comparison -> evaluate -> register best adapted policy

The pretraining steps of a training section are those its config needs, as ``frugalrl.pretraining``
declares them (PivotRL's importance evaluator for ``selection.kind: pivot``, the encoder and world
model for ``rollout.kind: latent``), wired the same way for every technique (``pipelines.stages``).
A stage the profile or its config does not enable is left out of the compiled graph (no
pretraining without a stage that needs it, no tune stage without ``tuning``, no latent or PEFT
branch without those profile stages). Every step is placed by ``pipelines.cluster``: requests, limits
and a deadline by its class (light, CPU, GPU), the tracking Secret as its environment. A training or
pretraining step asks for ``nvidia.com/gpu`` only where its config runs on a GPU (``Profile.pool``) and
lands on the GPU node pool through a node selector and a toleration given as pipeline parameters (the
names are the cluster's; their defaults are the profile's ``resources``). Training stages retry with
backoff; collection, pretraining and the PEFT source are cached (same config text and inputs, same
outputs), evaluation and promotion never are (one sub-pipeline, ``pipelines.stages``'s
``evaluate_and_register_pipeline``, for every registered model). Models pass between stages
as KFP artifacts (run directories); the registry holds them as MLflow models for everything downstream.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frugalrl.components.peft_compare import peft_compare
from frugalrl.components.report import report
from frugalrl.components.train import train
from frugalrl.components.train_distributed import train_distributed
from frugalrl.components.tune import tune_best, tune_worker
from frugalrl.pipelines.cluster import Placement
from frugalrl.pipelines.stages import evaluate_and_register_pipeline, pretrained_input, race_stage
from kfp import dsl

from frugalrl import pretraining
from frugalrl.ops import profiles
from frugalrl.ops.images import DEFAULT_IMAGE
from frugalrl.ops.profiles import Profile, ProfileStage

REPO = Path(__file__).resolve().parent.parent


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (``quick``, ``full``: ``profiles/<name>.yaml``) or path; its stages' configs are
    validated here, at compile time, and resolved against the checkout."""
    return profiles.load_profile(name_or_path, REPO)


def _training(task: dsl.PipelineTask) -> dsl.PipelineTask:
    return task.set_retry(num_retries=2, backoff_duration="60s", backoff_factor=2.0)


def _evaluate_register(gate: Any, model: Any, name: str, episodes: Any, seed: Any, label: str) -> dsl.PipelineTask:
    promoted = gate(model=model, model_name=name, eval_episodes=episodes, eval_seed=seed)
    return promoted.set_caching_options(False).set_display_name(f"evaluate and register {label} (promotion gate)")


def _episodes(stage: ProfileStage, pipeline_episodes: Any) -> Any:
    """The gate's episodes: the stage's own count (a constant in the IR) where the profile sets one, else the
    pipeline's ``eval_episodes`` parameter."""
    return pipeline_episodes if stage.eval_episodes is None else stage.eval_episodes


@dataclass(frozen=True)
class Branch:
    """A training section of the profile (``train``, ``latent``): its step names and the report inputs
    it fills. What is pretrained before it comes from its config (``frugalrl.pretraining``), not from here."""

    label: str  # "policy": display names say "evaluate and register policy"
    train_name: str
    policy: str  # the report's inputs: the trained policy, its promotion record, the pretrained model (if shown)
    promotion: str
    pretrained: str | None = None
    tunes: bool = False  # the profile's tune stage (Optuna workers) runs before this branch's training
    distributes: bool = False  # distributed.workers > 1 on GPU: a TrainJob instead of one pod


BRANCHES = {
    "train": Branch("policy", "train policy (tuned)", "policy", "promotion", tunes=True, distributes=True),
    "latent": Branch("latent policy", "curriculum training", "latent_policy", "latent_promotion", "encoder"),
}


def build_pipeline(profile: Profile) -> Any:
    """The ``@dsl.pipeline`` for ``profile``: only the stages it enables, each placed by ``pipelines.cluster``."""
    gate = evaluate_and_register_pipeline(Placement(profile.resources, profile.cluster))  # light steps only

    @dsl.pipeline(name=f"frugalrl-production-{profile.name}", description=__doc__.splitlines()[0])
    def production(
        eval_episodes: int = 20,
        eval_seed: int = 10_000,
        seed: int = 0,  # 0: each config's own seed; a scheduled run may pass another to train a new challenger
        gpu_node_selector: dict = profile.resources.gpu_node_selector,  # the default a run can override
        gpu_toleration: dict = profile.resources.gpu_toleration,
        training_namespace: str = "kubeflow",
        training_image: str = DEFAULT_IMAGE,  # compile --image / the last build replaces it (pipelines.containers)
        training_job_kind: str = "TrainJob",  # the distributed stage: TrainJob (Trainer v2) or PyTorchJob (legacy)
    ) -> None:
        place = Placement(profile.resources, profile.cluster, gpu_node_selector, gpu_toleration)
        run_id = dsl.PIPELINE_JOB_ID_PLACEHOLDER
        reported: dict[str, Any] = {}  # what the report stage reads
        built: dict[Any, dict[str, Any]] = {}  # pretraining wired so far: one stage asked for twice runs once
        for section, branch in BRANCHES.items():
            stage: ProfileStage | None = getattr(profile.stages, section)
            if stage is None:
                continue
            config, text, pool = profile.stage_config(stage), profile.stage_text(stage), profile.pool(stage)
            inputs = pretrained_input(pretraining.needed_by(config), text, stage.overrides, place, pool, built)
            raced: dict[str, Any] = {}  # the race winner's changes, for the tune workers, best trial and training
            if branch.tunes and profile.race is not None:
                decided = race_stage(profile.race_plan(), place, pool, run_id, profile.race.parallel, built)
                raced["raced"] = decided.outputs["Output"]
                reported["race"] = decided.outputs["table"]
            tuned: dict[str, Any] = {}
            if branch.tunes and config.tuning is not None and profile.tune.workers > 0:
                tune_overrides = [*stage.overrides, *profile.tune.overrides]
                with dsl.ParallelFor(items=list(range(profile.tune.workers)), name="tune-workers") as worker:
                    tuner = tune_worker(config_yaml=text, overrides=tune_overrides, worker=worker,
                                        pipeline_run_id=run_id, **inputs, **raced)  # fmt: skip
                    workers = place.optuna(place.on(pool, _training(tuner)))
                    workers.set_caching_options(False).set_display_name("Optuna worker")
                best = place.optuna(place.light(tune_best(config_yaml=text, overrides=tune_overrides,
                                                          pipeline_run_id=run_id, **raced)))  # fmt: skip
                best.after(workers)
                best.set_caching_options(False).set_display_name("best trial")
                tuned["tuned"] = best.output
            if branch.distributes and pool == "gpu" and config.distributed.workers > 1:  # N GPU pods, gradients fused
                # the step submits the job and watches it to its end; the job's workers hold the GPUs
                job = train_distributed(config_yaml=text, overrides=stage.overrides, pipeline_run_id=run_id,
                                        namespace=training_namespace, image=training_image,
                                        node_selector=gpu_node_selector, toleration=gpu_toleration,
                                        job_kind=training_job_kind, **tuned)  # fmt: skip
                trained = place.watcher(_training(job))
                trained.set_caching_options(False).set_display_name(f"train on {config.distributed.workers} workers")
            else:
                trained = place.on(pool, _training(train(config_yaml=text, overrides=stage.overrides, seed=seed,
                                                         pipeline_run_id=run_id, **inputs, **raced,
                                                         **tuned)))  # fmt: skip
                trained.set_caching_options(False).set_display_name(branch.train_name)
            model = trained.outputs["model"]
            promoted = _evaluate_register(gate, model, stage.model_name, _episodes(stage, eval_episodes), eval_seed,
                                          branch.label)  # fmt: skip
            reported[branch.policy], reported[branch.promotion] = model, promoted.outputs["report"]
            if branch.pretrained and inputs:
                reported[branch.pretrained] = inputs["pretrained"]
        if profile.peft is not None:
            stage = profile.peft
            text, pool = profile.stage_text(stage), profile.pool(stage)
            source = place.on(pool, _training(train(config_yaml=text, overrides=stage.overrides, seed=seed,
                                                    pipeline_run_id=run_id)))  # fmt: skip
            source.set_caching_options(True).set_display_name("train PEFT source policy")
            registered = _evaluate_register(gate, source.outputs["model"], stage.model_name,
                                            _episodes(stage, eval_episodes), eval_seed, "source policy")  # fmt: skip
            reported["peft_source"], reported["peft_source_promotion"] = (
                source.outputs["model"],
                registered.outputs["report"],
            )
            compared = place.on(pool, _training(peft_compare(config_yaml=text, overrides=stage.overrides,
                                                             base=source.outputs["model"],
                                                             pipeline_run_id=run_id)))  # fmt: skip
            compared.set_caching_options(False).set_display_name("compare PEFT methods")
            adapted = _evaluate_register(gate, compared.outputs["best"], stage.adapted_name,
                                         _episodes(stage, eval_episodes), eval_seed, "best adapted policy")  # fmt: skip
            reported["peft_comparison"] = compared.outputs["comparison"]  # declared: uploaded on a cluster
            reported["peft_promotion"] = adapted.outputs["report"]
            reported["peft_adapted"] = compared.outputs["best"]
        if reported:
            summary = place.light(report(**reported)).set_caching_options(False)
            summary.set_display_name("report")

    return production
