"""Component ``pretrain_evaluator``: a labelled Dataset in, the importance evaluator (Model) and Metrics out."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def pretrain_evaluator(
    config_yaml: str, overrides: list, dataset: Input[Dataset], evaluator: Output[Model], metrics: Output[Metrics]
):
    """Fit the evaluator with ``frugalrl.steps.pretrain_evaluator_step``; the Model is its directory."""
    from frugalrl.steps import pretrain_evaluator_step

    summary = pretrain_evaluator_step(config_yaml, [str(o) for o in overrides], dataset.path, evaluator.path)
    evaluator.metadata.update(
        {"dataset_sha256": summary["dataset_sha256"], "mlflow_model_uri": summary["model_uri"] or ""}
    )
    for key in ("spearman", "spearman_before", "final_loss", "train_samples", "test_samples"):
        metrics.log_metric(key, float(summary[key]))
