"""Component ``register``: registers the policy in MLflow and moves the champion alias if it wins."""

from kfp import dsl
from kfp.dsl import Input, Markdown, Model, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def register(model: Input[Model], eval_mean: float, model_name: str, report: Output[Markdown]) -> str:
    """Register with ``frugalrl.steps.register_step``; returns the new model version."""
    from frugalrl.steps import register_step, registration_markdown

    result = register_step(model.path, model_name, eval_mean)
    with open(report.path, "w") as handle:
        handle.write(registration_markdown(result))
    return str(result["version"])
