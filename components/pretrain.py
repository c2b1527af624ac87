"""Component ``pretrain``: a collected Dataset in, what a pretraining stage produces (Model) and Metrics out.

One component for every stage ``frugalrl.pretraining`` declares (PivotRL's evaluator, the latent
encoder, ...): ``stage`` names it, the library does the rest."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def pretrain(
    config_yaml: str, overrides: list, stage: str, dataset: Input[Dataset], pretrained: Output[Model],
    metrics: Output[Metrics],
):  # fmt: skip
    """Train with ``frugalrl.ops.steps.pretrain_step``; the Model is the directory the stage wrote."""
    from frugalrl.ops.steps import pretrain_step

    summary = pretrain_step(config_yaml, [str(o) for o in overrides], dataset.path, pretrained.path, stage)
    pretrained.metadata.update(
        {"stage": stage, "dataset_sha256": summary["dataset_sha256"], "mlflow_model_uri": summary["model_uri"] or ""}
    )
    for key, value in summary["metrics"].items():
        metrics.log_metric(key, value)
