"""The PPO minibatch step, the seam where the update's speed is decided.

One step = forward pass, clipped-surrogate loss, backward pass into each parameter's
``.grad``. The learner does the rest (gradient sync, clipping, optimizer) the same way for
every step kind, so the optimizer state and a checkpoint do not depend on the kind.

Kinds (``ppo.compile``):

- ``off``: eager PyTorch with autograd; any policy.
- ``fused``: the forward and backward pass written out by hand for the plain-MLP
  actor-critic (``frugalrl.algos.fused_mlp``): the two towers run as one batched matmul per
  layer and autograd is skipped. At CartPole sizes a step is dominated by per-operation
  overhead, not arithmetic, so fewer, larger operations are what make it fast.
- ``inductor``: ``torch.compile`` of the eager loss (inductor; C++ kernels on CPU). Its
  compile time is paid in the run.
- ``auto``: on the CPU, ``fused`` where the policy allows it, else ``off`` (docs/benchmarks.md,
  "Where PPO's time goes", has the measurements behind the choice); on a GPU ``off``, since
  no GPU measurement has chosen between the kinds there yet.

Numerically every kind computes the same loss and gradient up to float rounding
(``tests/test_ppo_step.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from frugalrl.config import PPOConfig
from frugalrl.nets.policy import ActorCritic, ActOutput


@dataclass
class Minibatch:
    """The samples of one optimizer step, already gathered from the rollout (k samples)."""

    obs: torch.Tensor  # (k, *obs_shape)
    actions: torch.Tensor  # (k,) or (k, act_dim)
    old_logprobs: torch.Tensor  # (k,)
    advantages: torch.Tensor  # (k,) normalised as the learner decided
    returns: torch.Tensor  # (k,)
    old_values: torch.Tensor  # (k,)
    weights: torch.Tensor | None  # (k,) loss weights; None means all 1
    denominator: float  # the loss is sum(w * loss_i) / denominator

    def __len__(self) -> int:
        return len(self.old_logprobs)


@dataclass
class StepOutput:
    loss: torch.Tensor  # () the scalar loss
    stats: torch.Tensor  # (5,) policy_loss, value_loss, entropy, approx_kl, clip_fraction (detached)
    cache: Any  # what backward() needs


STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


class PPOStep(Protocol):
    mode: str  # "off", "fused" or "inductor": what summary.json reports as ``compile``

    def act(self, obs: torch.Tensor) -> ActOutput:
        """Sample actions for a rollout (no gradient), as ``ActorCritic.act`` does."""
        ...

    def forward(self, mb: Minibatch, clip: float) -> StepOutput: ...

    def backward(self, out: StepOutput) -> None:
        """Write the loss gradient into each parameter's ``.grad`` (which must be None or zero)."""
        ...


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None, denominator: float) -> torch.Tensor:
    """``sum(w * values) / denominator``; a plain mean when every weight is 1 (the fast path)."""
    if weights is None:
        return values.sum() / denominator if denominator != len(values) else values.mean()
    return (weights * values).sum() / denominator


def ppo_loss(policy: ActorCritic, hp: PPOConfig, mb: Minibatch, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped-surrogate PPO loss with autograd: (loss, stats)."""
    newlogprob, entropy, newvalue = policy.evaluate(mb.obs, mb.actions)
    logratio = newlogprob - mb.old_logprobs
    ratio = logratio.exp()
    adv = mb.advantages
    policy_term = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    if hp.clip_vloss:
        clipped = mb.old_values + (newvalue - mb.old_values).clamp(-clip, clip)
        value_term = torch.max((newvalue - mb.returns) ** 2, (clipped - mb.returns) ** 2)
    else:
        value_term = (newvalue - mb.returns) ** 2
    policy_loss = weighted_mean(policy_term, mb.weights, mb.denominator)
    value_loss = weighted_mean(value_term, mb.weights, mb.denominator)
    entropy_mean = weighted_mean(entropy, mb.weights, mb.denominator)
    loss = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy_mean
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()  # Schulman's k3 estimator
        clip_fraction = ((ratio - 1).abs() > clip).float().mean()
        stats = torch.stack([policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction]).detach()
    return loss, stats


class EagerStep:
    """Autograd, operation by operation: works for every policy."""

    mode = "off"

    def __init__(self, policy: ActorCritic, hp: PPOConfig, loss_fn: Callable[..., Any] | None = None):
        self.policy = policy
        self.hp = hp
        self.loss_fn = loss_fn or ppo_loss

    def act(self, obs: torch.Tensor) -> ActOutput:
        return self.policy.act(obs)

    def forward(self, mb: Minibatch, clip: float) -> StepOutput:
        loss, stats = self.loss_fn(self.policy, self.hp, mb, clip)
        return StepOutput(loss, stats, loss)

    def backward(self, out: StepOutput) -> None:
        out.cache.backward()


class InductorStep(EagerStep):
    """``torch.compile`` of the eager loss; autograd runs the compiled backward graph."""

    mode = "inductor"

    def __init__(self, policy: ActorCritic, hp: PPOConfig):
        # dynamic=None: a first recompile on the short last minibatch, then shapes are generic.
        super().__init__(policy, hp, torch.compile(ppo_loss))


def inductor_available() -> str | None:
    """None when torch.compile can build kernels here, else why not."""
    import shutil

    if not hasattr(torch, "compile"):
        return "this torch has no torch.compile"
    if shutil.which("cc") is None and shutil.which("gcc") is None and shutil.which("g++") is None:
        return "no C/C++ compiler on PATH (inductor's CPU backend needs one)"
    return None
