"""Component ``pretrain_encoder``: a frame Dataset in, the encoder + world model (Model) and Metrics out."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def pretrain_encoder(
    config_yaml: str, overrides: list, dataset: Input[Dataset], encoder: Output[Model], metrics: Output[Metrics]
):
    """Train with ``frugalrl.steps.pretrain_encoder_step``; the Model is the directory holding encoder.pt."""
    from frugalrl.steps import pretrain_encoder_step

    summary = pretrain_encoder_step(config_yaml, [str(o) for o in overrides], dataset.path, encoder.path)
    encoder.metadata.update(
        {"dataset_sha256": summary["dataset_sha256"], "mlflow_model_uri": summary["model_uri"] or ""}
    )
    for key in ("psnr_db", "ball_r2_mlp", "paddle_r2_mlp", "ball_ceiling_r2", "latent_error_1", "train_flops"):
        if summary.get(key) is not None:
            metrics.log_metric(key, float(summary[key]))
