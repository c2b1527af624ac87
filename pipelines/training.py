"""The first pipeline: train -> evaluate -> register (challenger, champion if better)."""

from components.evaluate import evaluate
from components.register import register
from components.train import train
from kfp import dsl


@dsl.pipeline(name="frugalrl-train", description="Train a policy, evaluate it over fixed seeds, register it in MLflow.")
def training_pipeline(
    config_yaml: str,
    model_name: str,
    overrides: list = [],  # noqa: B006 - KFP needs a literal default
    eval_episodes: int = 20,
    eval_seed: int = 10_000,
) -> str:
    trained = train(config_yaml=config_yaml, overrides=overrides, pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER)
    trained.set_display_name("train policy")
    evaluated = evaluate(model=trained.outputs["model"], episodes=eval_episodes, seed=eval_seed)
    evaluated.set_display_name("evaluate over fixed seeds")
    registered = register(model=trained.outputs["model"], eval_mean=evaluated.outputs["Output"], model_name=model_name)
    registered.set_display_name("register and promote")
    return registered.outputs["Output"]
