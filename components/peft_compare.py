"""Component ``peft_compare``: the source policy (Model) in; the method table, the whole comparison
(table, plot, summary, adapters: a declared artifact, so a cluster uploads it) and the best adapted
policy out."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Artifact, Input, Markdown, Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def peft_compare(
    config_yaml: str,
    overrides: list,
    base: Input[Model],
    pipeline_run_id: str,
    table: Output[Markdown],
    metrics: Output[Metrics],
    best: Output[Model],
    comparison: Output[Artifact],
):
    """Run ``frugalrl.ops.steps.peft_compare_step`` on the source run; ``best`` is the best method's policy."""
    import shutil
    from pathlib import Path

    from frugalrl.ops.steps import peft_compare_step

    out = Path(comparison.path)
    summary = peft_compare_step(config_yaml, [str(o) for o in overrides], base.path, str(out), pipeline_run_id)
    Path(table.path).write_text((out / "peft_table.md").read_text())
    for row in summary["table"]:
        for key in ("eval_mean", "return_pct_of_full", "flops_pct_of_full", "trainable_pct"):
            if row[key] is not None:
                metrics.log_metric(f"{row['target']}.{row['method']}.{key}", float(row[key]))
    shutil.copytree(out / "best", best.path, dirs_exist_ok=True)
    best.metadata.update({"method": summary["best_method"] or "", "mlflow_run_id": summary.get("mlflow_run_id", "")})
