"""Component ``train``: config text in, a run directory (Model) and its metrics out."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def train(
    config_yaml: str,
    overrides: list,
    pipeline_run_id: str,
    model: Output[Model],
    metrics: Output[Metrics],
    evaluator: Input[Model] = None,
    tuned: list = [],  # noqa: B006 - KFP needs a literal default
):
    """Train a policy with ``frugalrl.steps.train_step``; the Model artifact is the run directory.

    ``evaluator``: a pretrained importance evaluator (PivotRL), when the config enables it.
    ``tuned``: the best trial's overrides from the ``tune`` stage, applied last.
    """
    from frugalrl.steps import train_step

    overrides = [str(o) for o in overrides] + [str(o) for o in tuned]
    if evaluator is not None:
        overrides.append(f"pivot.evaluator_from={evaluator.path}")
    summary = train_step(config_yaml, overrides, model.path, pipeline_run_id)
    model.metadata.update(
        {
            "env_id": summary["env_id"],
            "mlflow_run_id": summary["mlflow_run_id"] or "",
            "mlflow_model_uri": summary["model_uri"] or "",
            "config_hash": summary["config_hash"],
        }
    )
    for key in ("eval_mean", "eval_std", "eval_iqm", "real_env_steps", "train_flops", "wall_s", "peak_rss_mb"):
        metrics.log_metric(key, float(summary[key]))
