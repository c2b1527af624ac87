"""The training pipelines: [collect -> pretrain ->] train -> evaluate -> register.

A pretraining branch exists only in the pipeline built for a config that needs one: each
pretraining stage ``frugalrl.pretraining`` declares (PivotRL's importance evaluator, the latent
curriculum's encoder and world model, ...) gets a pipeline ``frugalrl-train-<stage>``, built by the
same builder from the declaration alone; other configs compile to the three-step graph. The PEFT
pipeline, with its second model and comparison branch, is its own function. Evaluation and
registration are one sub-pipeline (``pipelines.stages.evaluate_and_register_pipeline``), shared with the
production DAG.
"""

from typing import Any

from frugalrl.components.peft_compare import peft_compare
from frugalrl.components.train import train
from frugalrl.pipelines.cluster import default_placement
from frugalrl.pipelines.stages import evaluate_and_register_pipeline, pretrained_input
from kfp import dsl

from frugalrl import pretraining
from frugalrl.config import ExperimentConfig
from frugalrl.pretraining import PretrainStage

DESCRIPTION = "Train a policy, evaluate it over fixed seeds, register it in MLflow."
# A training pipeline's config is a run-time parameter, so its steps cannot know at compile time whether it
# wants a GPU: all run on the CPU pool (a profile's production DAG places GPU stages).
PLACE = default_placement()
_evaluate_and_register = evaluate_and_register_pipeline(PLACE)


def _register(model: Any, model_name: str, eval_episodes: int, eval_seed: int) -> dsl.PipelineTask:
    promoted = _evaluate_and_register(model=model, model_name=model_name, eval_episodes=eval_episodes,
                                      eval_seed=eval_seed)  # fmt: skip
    return promoted.set_caching_options(False).set_display_name("evaluate and register")


def build_training_pipeline(stage: PretrainStage | None = None) -> dsl.graph_component.GraphComponent:
    """The ``@dsl.pipeline`` for configs that need pretraining ``stage`` (None: none): train -> evaluate ->
    register, after the stage's collection and pretraining."""
    name = f"frugalrl-train-{stage.name}" if stage else "frugalrl-train"
    description = f"{DESCRIPTION} {stage.description}" if stage else DESCRIPTION

    @dsl.pipeline(name=name, description=description)
    def training(
        config_yaml: str,
        model_name: str,
        overrides: list = [],  # noqa: B006 - KFP needs a literal default
        eval_episodes: int = 20,
        eval_seed: int = 10_000,
    ) -> str:
        inputs = pretrained_input(stage, config_yaml, overrides, PLACE)
        trained = PLACE.cpu(train(config_yaml=config_yaml, overrides=overrides,
                                  pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, **inputs))  # fmt: skip
        trained.set_display_name(stage.train_name if stage else "train policy")
        return _register(trained.outputs["model"], model_name, eval_episodes, eval_seed).outputs["version"]

    return training


# Built once at import: `pipeline_for` hands out this object, and users import it by name.
training_pipeline = build_training_pipeline()
_BUILT: dict[str, dsl.graph_component.GraphComponent] = {}


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
    trained = PLACE.cpu(train(config_yaml=config_yaml, overrides=overrides,
                              pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER))  # fmt: skip
    trained.set_display_name("train source policy")
    registered = _register(trained.outputs["model"], model_name, eval_episodes, eval_seed)
    compared = PLACE.cpu(peft_compare(config_yaml=config_yaml, overrides=overrides, base=trained.outputs["model"],
                                      pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER))  # fmt: skip
    compared.set_display_name("compare PEFT methods")
    _register(compared.outputs["best"], adapted_model_name, eval_episodes, eval_seed)
    return registered.outputs["version"]


def pipeline_kind(config: ExperimentConfig) -> str:
    """``peft``, the name of the pretraining stage the config needs, or ``plain``."""
    if config.peft is not None:
        return "peft"
    stage = pretraining.needed_by(config)
    return stage.name if stage else "plain"


def pipeline_for(kind: str) -> dsl.graph_component.GraphComponent:
    """The pipeline of ``pipeline_kind``: a pretraining branch only for a declared stage's name (built
    on first use, then the same object), the plain graph for anything else."""
    if kind == "peft":
        return peft_pipeline
    declared = pretraining.stages()
    if kind not in declared:
        return training_pipeline
    if kind not in _BUILT:
        _BUILT[kind] = build_training_pipeline(declared[kind])
    return _BUILT[kind]
