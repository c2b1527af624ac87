"""The built-in PPO step kinds: ``off`` (eager), ``fused``, ``inductor`` and ``auto``.

``auto`` is the choice made without a measurement of this policy: on the CPU the fused step where
the policy allows it, else eager; on a GPU eager, since no GPU measurement has chosen between the
kinds there yet (``frugalrl.algos.ppo_step``'s docstring has the reasons).
"""

from __future__ import annotations

import logging

from frugalrl.algos.fused_mlp import FusedMLPStep, fused_unsupported
from frugalrl.algos.ppo_step import EagerStep, InductorStep, PPOStep, inductor_available
from frugalrl.algos.step_kinds import STEP_KINDS, StepContext

log = logging.getLogger("frugalrl.algos.ppo_step")  # the logger these fallbacks always wrote to


def _or_eager(kind: str, why: str | None, step: type[PPOStep], context: StepContext) -> PPOStep:
    """``step`` for this policy, or the eager step with one warning saying ``why`` it is not possible."""
    if why is not None:
        log.warning("ppo.compile = %s is not possible here (%s); using the eager step", kind, why)
        return EagerStep(context.policy, context.hp)
    return step(context.policy, context.hp)


@STEP_KINDS.register("off")
def eager(context: StepContext) -> PPOStep:
    return EagerStep(context.policy, context.hp)


@STEP_KINDS.register("fused")
def fused(context: StepContext) -> PPOStep:
    return _or_eager("fused", fused_unsupported(context.policy), FusedMLPStep, context)


@STEP_KINDS.register("inductor")
def inductor(context: StepContext) -> PPOStep:
    return _or_eager("inductor", inductor_available(), InductorStep, context)


@STEP_KINDS.register("auto")
def auto(context: StepContext) -> PPOStep:
    # no log line when falling back: auto promises only the fastest kind that runs here
    if context.device.type == "cpu" and fused_unsupported(context.policy) is None:
        return FusedMLPStep(context.policy, context.hp)
    return EagerStep(context.policy, context.hp)
