"""Component ``curriculum_train``: the latent curriculum on a pretrained encoder; a run directory out."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def curriculum_train(
    config_yaml: str,
    overrides: list,
    pipeline_run_id: str,
    encoder: Input[Model],
    model: Output[Model],
    metrics: Output[Metrics],
):
    """Train with ``frugalrl.steps.train_step`` from ``encoder`` (``latent.encoder_from``)."""
    from frugalrl.steps import train_step

    overrides = [*[str(o) for o in overrides], f"latent.encoder_from={encoder.path}"]
    summary = train_step(config_yaml, overrides, model.path, pipeline_run_id)
    model.metadata.update(
        {
            "env_id": summary["env_id"],
            "mlflow_run_id": summary["mlflow_run_id"] or "",
            "mlflow_model_uri": summary["model_uri"] or "",
            "config_hash": summary["config_hash"],
        }
    )
    for key in ("eval_mean", "real_env_steps", "virtual_env_steps", "train_flops", "wall_s"):
        metrics.log_metric(key, float(summary[key]))
    for key, value in summary.items():
        if key.startswith("stage") and key.endswith("_steps"):
            metrics.log_metric(key, float(value))
