"""The training pipelines: [collect -> pretrain ->] train -> evaluate -> register.

A pretraining branch exists only in the pipeline built for a config that enables it: the
importance evaluator for PivotRL (``selection.kind: pivot``), the encoder and world model for
the latent curriculum (``latent.enabled``); other configs compile to the three-step graph.
"""

from typing import Any

from components.collect_rollouts import collect_rollouts
from components.curriculum_train import curriculum_train
from components.evaluate import evaluate
from components.peft_compare import peft_compare
from components.pretrain_encoder import pretrain_encoder
from components.pretrain_evaluator import pretrain_evaluator
from components.register import register
from components.train import train
from kfp import dsl

from frugalrl.config import ExperimentConfig

DESCRIPTION = "Train a policy, evaluate it over fixed seeds, register it in MLflow."


def _evaluate_and_register(
    trained: dsl.PipelineTask, model_name: str, eval_episodes: int, eval_seed: int, output: str = "model"
) -> str:
    evaluated = evaluate(model=trained.outputs[output], episodes=eval_episodes, seed=eval_seed)
    evaluated.set_display_name("evaluate over fixed seeds")
    registered = register(
        model=trained.outputs[output],
        eval_returns=evaluated.outputs["eval_returns"],
        eval_seed=eval_seed,
        model_name=model_name,
    )
    registered.set_display_name("register and promote")
    return registered.outputs["Output"]


def _pretrain_then_train(
    config_yaml: str, overrides: list, pretrain: Any, trainer: Any, model: str, names: tuple[str, str, str]
) -> dsl.PipelineTask:
    """collect_rollouts -> ``pretrain`` (its Model output ``model``) -> ``trainer`` (that Model as input)."""
    collected = collect_rollouts(config_yaml=config_yaml, overrides=overrides)
    collected.set_display_name(names[0])
    pretrained = pretrain(config_yaml=config_yaml, overrides=overrides, dataset=collected.outputs["dataset"])
    pretrained.set_display_name(names[1])
    trained = trainer(
        config_yaml=config_yaml,
        overrides=overrides,
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        **{model: pretrained.outputs[model]},
    )
    trained.set_display_name(names[2])
    return trained


@dsl.pipeline(name="frugalrl-train", description=DESCRIPTION)
def training_pipeline(
    config_yaml: str,
    model_name: str,
    overrides: list = [],  # noqa: B006 - KFP needs a literal default
    eval_episodes: int = 20,
    eval_seed: int = 10_000,
) -> str:
    trained = train(config_yaml=config_yaml, overrides=overrides, pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER)
    trained.set_display_name("train policy")
    return _evaluate_and_register(trained, model_name, eval_episodes, eval_seed)


@dsl.pipeline(name="frugalrl-train-pivot", description=DESCRIPTION + " With a pretrained importance evaluator.")
def pivot_training_pipeline(
    config_yaml: str,
    model_name: str,
    overrides: list = [],  # noqa: B006 - KFP needs a literal default
    eval_episodes: int = 20,
    eval_seed: int = 10_000,
) -> str:
    trained = _pretrain_then_train(
        config_yaml, overrides, pretrain_evaluator, train, "evaluator",
        ("collect labelled rollouts", "pretrain importance evaluator", "train policy (PivotRL)"),
    )  # fmt: skip
    return _evaluate_and_register(trained, model_name, eval_episodes, eval_seed)


@dsl.pipeline(name="frugalrl-train-latent", description=DESCRIPTION + " Latent curriculum on a pretrained encoder.")
def latent_training_pipeline(
    config_yaml: str,
    model_name: str,
    overrides: list = [],  # noqa: B006 - KFP needs a literal default
    eval_episodes: int = 20,
    eval_seed: int = 10_000,
) -> str:
    trained = _pretrain_then_train(
        config_yaml, overrides, pretrain_encoder, curriculum_train, "encoder",
        ("collect game frames", "pretrain encoder + world model", "curriculum training (virtual + real)"),
    )  # fmt: skip
    return _evaluate_and_register(trained, model_name, eval_episodes, eval_seed)


@dsl.pipeline(
    name="frugalrl-peft", description="Train (or reuse) a SAC source policy, compare PEFT methods on changed tasks."
)
def peft_pipeline(
    config_yaml: str,
    model_name: str,
    adapted_model_name: str,
    overrides: list = [],  # noqa: B006 - KFP needs a literal default
    eval_episodes: int = 20,
    eval_seed: int = 10_000,
) -> str:
    trained = train(config_yaml=config_yaml, overrides=overrides, pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER)
    trained.set_display_name("train source policy")
    registered = _evaluate_and_register(trained, model_name, eval_episodes, eval_seed)
    compared = peft_compare(config_yaml=config_yaml, overrides=overrides, base=trained.outputs["model"],
                            pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER)  # fmt: skip
    compared.set_display_name("compare PEFT methods")
    _evaluate_and_register(compared, adapted_model_name, eval_episodes, eval_seed, output="best")
    return registered


def pipeline_kind(config: ExperimentConfig) -> str:
    if config.peft is not None:
        return "peft"
    if config.latent.enabled:
        return "latent"
    return "pivot" if config.selection.kind == "pivot" else "plain"


def pipeline_for(kind: str) -> dsl.graph_component.GraphComponent:
    """The pipeline a config needs (``pipeline_kind``): a pretraining branch only when it is enabled."""
    pipelines = {"latent": latent_training_pipeline, "pivot": pivot_training_pipeline, "peft": peft_pipeline}
    return pipelines.get(kind, training_pipeline)
