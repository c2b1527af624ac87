"""Component ``report``: each branch's runs and promotion records in; one HTML report out (and in MLflow)."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import HTML, Artifact, Input, Markdown, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def report(
    html: Output[HTML],
    policy: Input[Model] = None,
    promotion: Input[Markdown] = None,
    encoder: Input[Model] = None,
    latent_policy: Input[Model] = None,
    latent_promotion: Input[Markdown] = None,
    peft_source: Input[Model] = None,
    peft_source_promotion: Input[Markdown] = None,
    peft_adapted: Input[Model] = None,
    peft_comparison: Input[Artifact] = None,
    peft_promotion: Input[Markdown] = None,
    race: Input[Markdown] = None,
):
    """Build the report with ``frugalrl.ops.steps.report_step``: one section per branch the profile ran."""
    from pathlib import Path

    from frugalrl.ops.steps import report_step

    def branch(runs: dict, *decisions) -> dict:
        return {"runs": {label: a.path for label, a in runs.items() if a is not None},
                "decisions": [Path(d.path).read_text() for d in decisions if d is not None]}  # fmt: skip

    branches = []
    if policy is not None:
        trained = branch({"policy": policy}, promotion)
        trained["race"] = Path(race.path).read_text() if race is not None else ""
        branches.append(trained)
    if latent_policy is not None:
        branches.append(branch({"encoder pretraining": encoder, "latent curriculum": latent_policy}, latent_promotion))
    if peft_source is not None:
        peft = branch({"PEFT source": peft_source, "best adapted": peft_adapted}, peft_source_promotion, peft_promotion)
        peft["peft_dir"] = peft_comparison.path if peft_comparison is not None else None
        branches.append(peft)
    report_step(branches, html.path)
