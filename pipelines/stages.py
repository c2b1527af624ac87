"""Wiring both the training pipelines and the production DAG share: a config's pretraining steps, built
from what ``frugalrl.pretraining`` declares, and the evaluate-and-register sub-pipeline.

Nothing here names a technique: a stage the library declares is wired the same way as every other,
so adding one changes no file in this package."""

from typing import Any, NamedTuple

from frugalrl.components.collect_rollouts import collect_rollouts
from frugalrl.components.evaluate import evaluate
from frugalrl.components.pretrain import pretrain
from frugalrl.components.race import race_decide, race_run
from frugalrl.components.register import register
from frugalrl.pipelines.cluster import Placement
from kfp import dsl
from kfp.dsl import Input, Markdown, Model

from frugalrl import pretraining
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
    stage: PretrainStage | None,
    config_yaml: Any,
    overrides: Any,
    place: Placement,
    pool: str = "cpu",
    built: dict[Any, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """collect -> pretrain for ``stage`` (none without one); the trainer's (and tuner's) inputs for it.

    Both steps are cached: the same config text and inputs make the same dataset and model. Collection
    steps environments on the CPU pool; ``pool`` is the pretraining step's (``Profile.pool``). ``built``: the
    pipeline's pretraining so far, by stage, config text and overrides; one asked for again is wired once."""
    if stage is None:
        return {}
    # a pipeline parameter (the training pipelines' overrides) is not a list here: those pipelines build one stage
    key = (stage.name, config_yaml, tuple(overrides), pool) if built is not None else None
    if key is not None and key in built:
        return built[key]
    collected = place.cpu(collect_rollouts(config_yaml=config_yaml, overrides=overrides, stage=stage.name))
    collected.set_caching_options(True).set_display_name(stage.collect_name)
    trained = pretrain(config_yaml=config_yaml, overrides=overrides, stage=stage.name,
                       dataset=collected.outputs["dataset"])  # fmt: skip
    place.on(pool, trained.set_caching_options(True).set_display_name(stage.pretrain_name))
    inputs = {"pretrained": trained.outputs["pretrained"], "stage": stage.name}
    if key is not None:
        built[key] = inputs
    return inputs


def race_stage(
    plan: dict[str, Any], place: Placement, pool: str, pipeline_run_id: Any, parallel: int,
    built: dict[Any, dict[str, Any]] | None = None,
) -> Any:  # fmt: skip
    """A race (``Profile.race_plan``): the pretraining its contenders need, once; contenders x seeds as one
    ParallelFor of runs on ``pool`` (never cached, no retries: a rerun would be another measurement); then the
    decision step, whose output is the winner's overrides and whose ``table`` the report shows."""
    needed = plan["pretrain"]  # the one stage the contenders need, if any: built once (``built``)
    inputs = {} if not needed else pretrained_input(pretraining.stage(needed["stage"]), plan["config_yaml"],
                                                    needed["sets"], place, pool, built)  # fmt: skip
    runs = [{"contender": c["name"], "overrides": [*plan["sets"], *c["overrides"]], "seed": seed}
            for seed in plan["seeds"] for c in plan["contenders"]]  # fmt: skip
    with dsl.ParallelFor(items=runs, name="race-runs", parallelism=parallel or None) as run:
        raced = race_run(config_yaml=plan["config_yaml"], run=run, cpu_budget_s=plan["cpu_budget_s"], **inputs)
        place.race(pool, raced).set_caching_options(False).set_display_name("race run")
    decided = race_decide(race=plan, rows=dsl.Collected(raced.output), pipeline_run_id=pipeline_run_id)
    return place.light(decided).set_caching_options(False).set_display_name("race decision")
