"""The training pipelines: [collect -> pretrain ->] train -> evaluate -> register.

A pretraining branch exists only in the pipeline built for a config that enables it: the
importance evaluator for PivotRL (``selection.kind: pivot``), the encoder and world model for
the latent curriculum (``latent.enabled``); other configs compile to the three-step graph. The
three share one builder (``build_training_pipeline``, a ``Variant`` each); the PEFT pipeline,
with its second model and comparison branch, is its own function.
"""

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Variant:
    """What sets one training pipeline apart: its name, and the pretraining branch before training."""

    name: str
    description: str
    train_name: str  # the training step's display name
    pretrain: Any = None  # component: collect_rollouts -> this -> its Model output ``model_input``
    trainer: Any = train
    model_input: str = ""  # the pretrained Model: pretrain's output and trainer's input of that name
    pretrain_names: tuple[str, str] = ("", "")  # display names: collection, pretraining


VARIANTS = {
    "plain": Variant("frugalrl-train", DESCRIPTION, "train policy"),
    "pivot": Variant(
        "frugalrl-train-pivot", DESCRIPTION + " With a pretrained importance evaluator.", "train policy (PivotRL)",
        pretrain_evaluator, train, "evaluator", ("collect labelled rollouts", "pretrain importance evaluator"),
    ),
    "latent": Variant(
        "frugalrl-train-latent", DESCRIPTION + " Latent curriculum on a pretrained encoder.",
        "curriculum training (virtual + real)", pretrain_encoder, curriculum_train, "encoder",
        ("collect game frames", "pretrain encoder + world model"),
    ),
}  # fmt: skip


def _train(variant: Variant, config_yaml: str, overrides: list) -> dsl.PipelineTask:
    """[collect_rollouts -> pretrain ->] train: the pretrained Model, if any, is the trainer's input."""
    pretrained: dict[str, Any] = {}
    if variant.pretrain is not None:
        collected = collect_rollouts(config_yaml=config_yaml, overrides=overrides)
        collected.set_display_name(variant.pretrain_names[0])
        pretrain = variant.pretrain(config_yaml=config_yaml, overrides=overrides, dataset=collected.outputs["dataset"])
        pretrain.set_display_name(variant.pretrain_names[1])
        pretrained[variant.model_input] = pretrain.outputs[variant.model_input]
    trained = variant.trainer(
        config_yaml=config_yaml, overrides=overrides, pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, **pretrained
    )
    trained.set_display_name(variant.train_name)
    return trained


def build_training_pipeline(kind: str) -> dsl.graph_component.GraphComponent:
    """The ``@dsl.pipeline`` of ``VARIANTS[kind]``: train -> evaluate -> register, after its pretraining."""
    variant = VARIANTS[kind]

    @dsl.pipeline(name=variant.name, description=variant.description)
    def training(
        config_yaml: str,
        model_name: str,
        overrides: list = [],  # noqa: B006 - KFP needs a literal default
        eval_episodes: int = 20,
        eval_seed: int = 10_000,
    ) -> str:
        trained = _train(variant, config_yaml, overrides)
        return _evaluate_and_register(trained, model_name, eval_episodes, eval_seed)

    return training


# Built once at import: `pipeline_for` hands out these objects, and users import them by name.
training_pipeline = build_training_pipeline("plain")
pivot_training_pipeline = build_training_pipeline("pivot")
latent_training_pipeline = build_training_pipeline("latent")


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
