"""Component ``train``: config text in, a run directory (Model) and its metrics out."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def train(
    config_yaml: str,
    overrides: list,
    pipeline_run_id: str,
    model: Output[Model],
    metrics: Output[Metrics],
    pretrained: Input[Model] = None,
    stage: str = "",
    tuned: list = [],  # noqa: B006 - KFP needs a literal default
    seed: int = 0,
    raced: list = [],  # noqa: B006 - KFP needs a literal default
):
    """Train a policy with ``frugalrl.ops.steps.train_step``; the Model artifact is the run directory.

    ``pretrained``: what pretraining stage ``stage`` produced; the library points the config at it.
    ``raced``: the race winner's changes (the ``race`` stage), after ``overrides``. ``tuned``: the best
    trial's overrides from the ``tune`` stage, applied last. ``seed``: 0 keeps the
    config's seed; another (a scheduled run's) replaces it.
    """
    from frugalrl.ops.steps import train_step, training_metrics

    overrides = [str(o) for o in [*overrides, *raced, *tuned]] + ([f"seed={seed}"] if seed else [])
    path = pretrained.path if pretrained is not None else ""
    summary = train_step(config_yaml, overrides, model.path, pipeline_run_id, pretrained=path, stage=stage)
    model.metadata.update(
        {
            "env_id": summary["env_id"],
            "mlflow_run_id": summary["mlflow_run_id"] or "",
            "mlflow_model_uri": summary["model_uri"] or "",
            "config_hash": summary["config_hash"],
        }
    )
    for key, value in training_metrics(summary).items():
        metrics.log_metric(key, value)
