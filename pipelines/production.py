"""The production DAG, built from a profile (``profiles/quick.yaml``, ``profiles/full.yaml``).

    collect (pivot) -> pretrain evaluator -> tune workers (ParallelFor, one study) -> best trial
        -> train (tuned, PivotRL, the pretrained evaluator) -> evaluate -> register (promotion gate)
    collect (frames) -> pretrain encoder + world model -> curriculum training -> evaluate -> register
    train source (SAC) -> evaluate -> register;  -> PEFT comparison -> evaluate -> register best adapted policy

A stage the profile or its config does not enable is left out of the compiled graph (no
evaluator without ``selection.kind: pivot``, no tune stage without ``tuning``, no latent or PEFT
branch without those profile stages). With ``gpu: true`` every training and pretraining stage
asks for ``nvidia.com/gpu`` with the profile's CPU/memory requests and limits, and lands on the
GPU node pool through a node selector and a toleration given as pipeline parameters (the names
are the cluster's, not the code's; their defaults are the profile's ``resources``, typed in
``frugalrl.profiles``). Training stages retry with backoff; collection and pretraining are cached
(same config text and inputs, same outputs), evaluation and promotion never are. Models pass
between stages as KFP artifacts (run directories); the registry holds them as MLflow models for
everything downstream.
"""

from pathlib import Path
from typing import Any

from components import FRUGALRL_IMAGE
from components.collect_rollouts import collect_rollouts
from components.curriculum_train import curriculum_train
from components.evaluate import evaluate
from components.peft_compare import peft_compare
from components.pretrain_encoder import pretrain_encoder
from components.pretrain_evaluator import pretrain_evaluator
from components.register import register
from components.report import report
from components.train import train
from components.train_distributed import train_distributed
from components.tune import tune_best, tune_worker
from kfp import dsl, kubernetes

from frugalrl import profiles
from frugalrl.profiles import Profile

REPO = Path(__file__).resolve().parent.parent


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (``quick``, ``full``: ``profiles/<name>.yaml``) or path; its stages' configs are
    validated here, at compile time, and resolved against the checkout."""
    return profiles.load_profile(name_or_path, REPO)


def _on_gpu(task: dsl.PipelineTask, profile: Profile, node_selector: Any, toleration: Any) -> dsl.PipelineTask:
    """A GPU stage: accelerator, requests and limits, the GPU pool's node selector and toleration."""
    if not profile.gpu:
        return task
    res = profile.resources
    task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(res.gpu_count)
    task.set_cpu_request(res.cpu_request).set_cpu_limit(res.cpu_limit)
    task.set_memory_request(res.memory_request).set_memory_limit(res.memory_limit)
    kubernetes.add_node_selector_json(task, node_selector)
    kubernetes.add_toleration_json(task, toleration)
    return task


def _training(task: dsl.PipelineTask) -> dsl.PipelineTask:
    return task.set_retry(num_retries=2, backoff_duration="60s", backoff_factor=2.0)


def _cached(task: dsl.PipelineTask, name: str) -> dsl.PipelineTask:
    return task.set_caching_options(True).set_display_name(name)


def _evaluate_register(model: Any, name: str, episodes: Any, seed: Any, label: str) -> dsl.PipelineTask:
    evaluated = evaluate(model=model, episodes=episodes, seed=seed).set_caching_options(False)
    evaluated.set_display_name(f"evaluate {label}")
    registered = register(model=model, eval_returns=evaluated.outputs["eval_returns"], eval_seed=seed,
                          model_name=name).set_caching_options(False)  # fmt: skip
    return registered.set_display_name(f"register {label} (promotion gate)")


def build_pipeline(profile: Profile) -> Any:
    """The ``@dsl.pipeline`` for ``profile``: only the stages it enables."""

    @dsl.pipeline(name=f"frugalrl-production-{profile.name}", description=__doc__.splitlines()[0])
    def production(
        eval_episodes: int = 20,
        eval_seed: int = 10_000,
        gpu_node_selector: dict = profile.resources.node_selector,  # the default a run can override
        gpu_toleration: dict = profile.resources.toleration,
        training_namespace: str = "kubeflow",
        training_image: str = FRUGALRL_IMAGE,
        training_job_kind: str = "TrainJob",  # the distributed stage: TrainJob (Trainer v2) or PyTorchJob (legacy)
    ) -> None:
        gpu = lambda task: _on_gpu(task, profile, gpu_node_selector, gpu_toleration)  # noqa: E731
        run_id = dsl.PIPELINE_JOB_ID_PLACEHOLDER
        reported: dict[str, Any] = {}  # what the report stage reads
        if profile.train is not None:
            stage = profile.train
            config, text = profile.stage_config(stage), profile.stage_text(stage)
            inputs: dict[str, Any] = {}
            if config.selection.kind == "pivot":
                collected = _cached(collect_rollouts(config_yaml=text, overrides=stage.overrides),
                                    "collect labelled rollouts")  # fmt: skip
                evaluator = gpu(_cached(pretrain_evaluator(config_yaml=text, overrides=stage.overrides,
                                                           dataset=collected.outputs["dataset"]),
                                        "pretrain importance evaluator"))  # fmt: skip
                inputs["evaluator"] = evaluator.outputs["evaluator"]
            if config.tuning is not None and profile.tune.workers > 0:
                tune_overrides = [*stage.overrides, *profile.tune.overrides]
                pretrained = {"evaluator": inputs["evaluator"]} if "evaluator" in inputs else {}
                with dsl.ParallelFor(items=list(range(profile.tune.workers)), name="tune-workers") as worker:
                    tuner = tune_worker(config_yaml=text, overrides=tune_overrides, worker=worker,
                                        pipeline_run_id=run_id, **pretrained)  # fmt: skip
                    workers = gpu(_training(tuner))
                    workers.set_caching_options(False).set_display_name("Optuna worker")
                best = tune_best(config_yaml=text, overrides=tune_overrides, pipeline_run_id=run_id)
                best.after(workers)
                best.set_caching_options(False).set_display_name("best trial")
                inputs["tuned"] = best.output
            if profile.gpu and config.distributed.workers > 1:  # N GPU pods: a TrainJob, gradients fused
                extra = {"tuned": inputs["tuned"]} if "tuned" in inputs else {}
                trained = _training(train_distributed(
                    config_yaml=text, overrides=stage.overrides, pipeline_run_id=run_id,
                    namespace=training_namespace, image=training_image, node_selector=gpu_node_selector,
                    toleration=gpu_toleration, job_kind=training_job_kind, **extra,
                ))  # fmt: skip
                trained.set_caching_options(False).set_display_name(f"train on {config.distributed.workers} workers")
            else:
                trained = gpu(_training(train(config_yaml=text, overrides=stage.overrides,
                                              pipeline_run_id=run_id, **inputs)))  # fmt: skip
                trained.set_caching_options(False).set_display_name("train policy (tuned)")
            model = trained.outputs["model"]
            promoted = _evaluate_register(model, stage.model_name, eval_episodes, eval_seed, "policy")
            reported["policy"], reported["promotion"] = model, promoted.outputs["report"]
        if profile.latent is not None:
            stage = profile.latent
            text = profile.stage_text(stage)
            frames = _cached(collect_rollouts(config_yaml=text, overrides=stage.overrides), "collect frames")
            encoder = gpu(_cached(pretrain_encoder(config_yaml=text, overrides=stage.overrides,
                                                   dataset=frames.outputs["dataset"]),
                                  "pretrain encoder + world model"))  # fmt: skip
            curriculum = gpu(
                _training(
                    curriculum_train(
                        config_yaml=text,
                        overrides=stage.overrides,
                        pipeline_run_id=run_id,
                        encoder=encoder.outputs["encoder"],
                    )
                )
            )
            curriculum.set_caching_options(False).set_display_name("curriculum training")
            latent = _evaluate_register(curriculum.outputs["model"], stage.model_name, eval_episodes, eval_seed,
                                        "latent policy")  # fmt: skip
            reported["encoder"] = encoder.outputs["encoder"]
            reported["latent_policy"], reported["latent_promotion"] = (
                curriculum.outputs["model"],
                latent.outputs["report"],
            )
        if profile.peft is not None:
            stage = profile.peft
            text = profile.stage_text(stage)
            source = gpu(_training(train(config_yaml=text, overrides=stage.overrides, pipeline_run_id=run_id)))
            source.set_caching_options(True).set_display_name("train PEFT source policy")
            registered = _evaluate_register(source.outputs["model"], stage.model_name, eval_episodes, eval_seed,
                                            "source policy")  # fmt: skip
            reported["peft_source"], reported["peft_source_promotion"] = (
                source.outputs["model"],
                registered.outputs["report"],
            )
            compared = gpu(_training(peft_compare(config_yaml=text, overrides=stage.overrides,
                                                  base=source.outputs["model"], pipeline_run_id=run_id)))  # fmt: skip
            compared.set_caching_options(False).set_display_name("compare PEFT methods")
            adapted = _evaluate_register(compared.outputs["best"], stage.adapted_name, eval_episodes, eval_seed,
                                         "best adapted policy")  # fmt: skip
            reported["peft_comparison"] = compared.outputs["comparison"]  # declared: uploaded on a cluster
            reported["peft_promotion"] = adapted.outputs["report"]
            reported["peft_adapted"] = compared.outputs["best"]
        if reported:
            summary = report(**reported).set_caching_options(False)
            summary.set_display_name("report")

    return production
