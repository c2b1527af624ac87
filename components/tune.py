"""Components ``tune_worker`` and ``tune_best``: Optuna workers sharing one study, then the best trial's overrides."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def tune_worker(
    config_yaml: str,
    overrides: list,
    worker: int,
    pipeline_run_id: str,
    metrics: Output[Metrics],
    pretrained: Input[Model] = None,
    stage: str = "",
    raced: list = [],  # noqa: B006 - KFP needs a literal default
):
    """Run ``frugalrl.ops.steps.tune_step``: this worker's trials of the shared study (``OPTUNA_STORAGE``),
    one study per pipeline run. ``pretrained``: what pretraining stage ``stage`` produced, which every
    trial starts from, as the tuned training will. ``raced``: the race winner's changes, after ``overrides``."""
    import tempfile

    from frugalrl.ops.steps import tune_step

    path = pretrained.path if pretrained is not None else ""
    result = tune_step(config_yaml, [str(o) for o in [*overrides, *raced]], tempfile.mkdtemp(prefix="tune-"), worker,
                       pipeline_run_id, pretrained=path, stage=stage)  # fmt: skip
    metrics.log_metric("best_value", float(result["best_value"]))
    for state, count in result["trials"].items():
        metrics.log_metric(f"trials_{state}", float(count))


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def tune_best(config_yaml: str, overrides: list, pipeline_run_id: str, raced: list = []) -> list:  # noqa: B006
    """The best finished trial's overrides (``frugalrl.ops.steps.tune_best_step``), for the training stage."""
    from frugalrl.ops.steps import tune_best_step

    return tune_best_step(config_yaml, [str(o) for o in [*overrides, *raced]], pipeline_run_id)
