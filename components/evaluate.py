"""Component ``evaluate``: a trained run (Model) in; evaluation Metrics, the mean and the per-episode returns out."""

from typing import NamedTuple

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def evaluate(model: Input[Model], episodes: int, seed: int, metrics: Output[Metrics]) -> NamedTuple(
    "EvalOutputs", eval_mean=float, eval_returns=list
):
    """Evaluate the policy over ``episodes`` fixed seeds with ``frugalrl.ops.steps.evaluate_step``."""
    from collections import namedtuple

    from frugalrl.ops.steps import evaluate_step

    result = evaluate_step(model.path, episodes, seed)
    for key in ("eval_mean", "eval_std", "eval_iqm", "eval_ci_low", "eval_ci_high", "eval_episodes"):
        metrics.log_metric(key, float(result[key]))
    outputs = namedtuple("EvalOutputs", ["eval_mean", "eval_returns"])
    return outputs(float(result["eval_mean"]), [float(r) for r in result["returns"]])
