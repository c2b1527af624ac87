"""Component ``register``: registers the policy in MLflow; the promotion gate decides on the champion alias."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Input, Markdown, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def register(model: Input[Model], eval_returns: list, eval_seed: int, model_name: str, report: Output[Markdown]) -> str:
    """Register with ``frugalrl.ops.steps.register_step``; returns the new model version."""
    from frugalrl.ops.steps import register_step, registration_markdown

    result = register_step(model.path, model_name, [float(r) for r in eval_returns], eval_seed)
    with open(report.path, "w") as handle:
        handle.write(registration_markdown(result))
    return str(result["version"])
