"""Wiring both the training pipelines and the production DAG share: a config's pretraining steps, built
from what ``frugalrl.pretraining`` declares, and the evaluate-and-register sub-pipeline.

Nothing here names a technique: a stage the library declares is wired the same way as every other,
so adding one changes no file in this package."""

from typing import Any, NamedTuple

from frugalrl.components.collect_rollouts import collect_rollouts
from frugalrl.components.evaluate import evaluate
from frugalrl.components.pretrain import pretrain
from frugalrl.components.register import register
from frugalrl.pipelines.cluster import Placement
from kfp import dsl
from kfp.dsl import Input, Markdown, Model

from frugalrl.pretraining import PretrainStage


class Promotion(NamedTuple):
    version: str
    report: Markdown


def evaluate_and_register_pipeline(place: Placement) -> Any:
    """The evaluate-and-register sub-pipeline, its two light steps placed by ``place``; built once per pipeline."""

    @dsl.pipeline(name="evaluate-and-register", description="Evaluate a policy over fixed seeds, register it in "
                  "MLflow; the promotion gate decides on the champion alias.")  # fmt: skip
    def evaluate_and_register(model: Input[Model], model_name: str, eval_episodes: int, eval_seed: int) -> Promotion:
        # Never cached: a registration is a new model version each time, and the gate compares with today's champion.
        evaluated = place.light(evaluate(model=model, episodes=eval_episodes, seed=eval_seed))
        evaluated.set_caching_options(False).set_display_name("evaluate over fixed seeds")
        registered = place.light(register(model=model, eval_returns=evaluated.outputs["eval_returns"],
                                          eval_seed=eval_seed, model_name=model_name))  # fmt: skip
        registered.set_caching_options(False).set_display_name("register and promote")
        return Promotion(version=registered.outputs["Output"], report=registered.outputs["report"])

    return evaluate_and_register


def pretrained_input(
    stage: PretrainStage | None, config_yaml: Any, overrides: Any, place: Placement, pool: str = "cpu"
) -> dict[str, Any]:
    """collect -> pretrain for ``stage`` (none without one); the trainer's (and tuner's) inputs for it.

    Both steps are cached: the same config text and inputs make the same dataset and model. Collection
    steps environments on the CPU pool; ``pool`` is the pretraining step's (``Profile.pool``)."""
    if stage is None:
        return {}
    collected = place.cpu(collect_rollouts(config_yaml=config_yaml, overrides=overrides, stage=stage.name))
    collected.set_caching_options(True).set_display_name(stage.collect_name)
    trained = pretrain(config_yaml=config_yaml, overrides=overrides, stage=stage.name,
                       dataset=collected.outputs["dataset"])  # fmt: skip
    place.on(pool, trained.set_caching_options(True).set_display_name(stage.pretrain_name))
    return {"pretrained": trained.outputs["pretrained"], "stage": stage.name}
