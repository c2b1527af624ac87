"""Component ``report``: the trained runs and promotion records in; one HTML report out (and in MLflow)."""

from kfp import dsl
from kfp.dsl import HTML, Input, Markdown, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def report(
    policy: Input[Model],
    promotion: Input[Markdown],
    html: Output[HTML],
    latent_policy: Input[Model] = None,
    latent_promotion: Input[Markdown] = None,
    peft_table: Input[Markdown] = None,
    peft_promotion: Input[Markdown] = None,
):
    """Build the report with ``frugalrl.steps.report_step``."""
    from pathlib import Path

    from frugalrl.steps import report_step

    runs = {"policy": policy.path}
    decisions = [Path(promotion.path).read_text()]
    if latent_policy is not None:
        runs["latent curriculum"] = latent_policy.path
    if latent_promotion is not None:
        decisions.append(Path(latent_promotion.path).read_text())
    if peft_promotion is not None:
        decisions.append(Path(peft_promotion.path).read_text())
    peft_dir = str(Path(peft_table.path).parent / "peft") if peft_table is not None else None
    report_step(runs, decisions, html.path, peft_dir)
