"""Components ``tune_worker`` and ``tune_best``: Optuna workers sharing one study, then the best trial's overrides."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def tune_worker(
    config_yaml: str,
    overrides: list,
    worker: int,
    pipeline_run_id: str,
    metrics: Output[Metrics],
    evaluator: Input[Model] = None,
):
    """Run ``frugalrl.steps.tune_step``: this worker's trials of the shared study (``OPTUNA_STORAGE``),
    one study per pipeline run. ``evaluator``: the pretrained importance evaluator every trial starts
    from, as the tuned training will (PivotRL)."""
    import tempfile

    from frugalrl.steps import tune_step

    overrides = [str(o) for o in overrides]
    if evaluator is not None:
        overrides.append(f"pivot.evaluator_from={evaluator.path}")
    result = tune_step(config_yaml, overrides, tempfile.mkdtemp(prefix="tune-"), worker, pipeline_run_id)
    metrics.log_metric("best_value", float(result["best_value"]))
    for state, count in result["trials"].items():
        metrics.log_metric(f"trials_{state}", float(count))


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def tune_best(config_yaml: str, overrides: list, pipeline_run_id: str) -> list:
    """The best finished trial's overrides (``frugalrl.steps.tune_best_step``), for the training stage."""
    from frugalrl.steps import tune_best_step

    return tune_best_step(config_yaml, [str(o) for o in overrides], pipeline_run_id)
