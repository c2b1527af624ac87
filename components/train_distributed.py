"""Component ``train_distributed``: training on N GPU pods (gradient fusion) as a Kubeflow Trainer v2
TrainJob, or, with ``job_kind="PyTorchJob"``, the Training Operator's legacy PyTorchJob."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def train_distributed(
    config_yaml: str,
    overrides: list,
    pipeline_run_id: str,
    namespace: str,
    image: str,
    node_selector: dict,
    toleration: dict,
    model: Output[Model],
    metrics: Output[Metrics],
    tuned: list = [],  # noqa: B006 - KFP needs a literal default
    job_kind: str = "TrainJob",
):
    """Launch and follow the job (``frugalrl.ops.steps.train_distributed_step``); Model: the rank-0 run."""
    from frugalrl.ops.steps import train_distributed_step

    all_overrides = [str(o) for o in overrides] + [str(o) for o in tuned]
    summary = train_distributed_step(
        config_yaml, all_overrides, model.path, pipeline_run_id, namespace, image, node_selector, toleration,
        job_kind=job_kind,
    )  # fmt: skip
    model.metadata.update({"mlflow_run_id": summary["mlflow_run_id"] or "", "workers": summary["workers"],
                           "job_kind": job_kind})  # fmt: skip
    for key in ("eval_mean", "real_env_steps_all_workers", "bytes_sent", "compression_ratio", "train_flops"):
        metrics.log_metric(key, float(summary[key]))
