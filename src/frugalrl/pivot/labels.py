"""Importance labels: how much a state's sample would move the policy.

Three definitions, chosen by ``selection.settings.label``:

``policy_gradient`` (default)
    ``|A| * ||d log pi(a|s) / d(output)||``: the size of the policy-gradient term at the policy's
    output layer. For a categorical policy the gradient w.r.t. the logits is ``onehot(a) - pi``,
    whose norm needs the full distribution; for a Gaussian it is ``(a - mu) / sigma^2`` w.r.t.
    the mean. Free: the rollout already stores the distribution parameters.
``advantage``
    ``|A|``: the crudest proxy.
``grad_norm``
    The seed's gradient saliency taken literally: the per-sample norm of the gradient of
    ``A * log pi(a|s)`` w.r.t. all policy parameters (``torch.func`` vmap over samples). Exact,
    and about as expensive as a backward pass per sample; used for pretraining and ablations.

All labels are turned into ranks in [0, 1] (``rank_normalize``) before the evaluator sees them.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch.func import functional_call, grad, vmap

from frugalrl.nets.policy import ActorCritic

LabelKind = Literal["policy_gradient", "advantage", "grad_norm"]


def rank_normalize(values: torch.Tensor) -> torch.Tensor:
    """Ranks scaled to [0, 1] (ties broken by position): the quantile of each value."""
    n = values.numel()
    if n < 2:
        return torch.full_like(values, 0.5, dtype=torch.float32)
    ranks = torch.empty(n, dtype=torch.float32, device=values.device)
    ranks[values.argsort()] = torch.arange(n, dtype=torch.float32, device=values.device)
    return ranks / (n - 1)


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two 1-D tensors."""
    ra, rb = rank_normalize(a), rank_normalize(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = (ra.norm() * rb.norm()).clamp_min(1e-12)
    return float((ra * rb).sum() / denom)


def policy_gradient_label(
    policy: ActorCritic, dist_params: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor
) -> torch.Tensor:
    """``|A| * ||d log pi(a|s) / d(output)||`` from stored distribution parameters, (B,)."""
    if policy.discrete:
        probs = dist_params.exp()  # stored as log-probabilities
        onehot = torch.nn.functional.one_hot(actions.long(), probs.shape[-1]).to(probs.dtype)
        output_grad = (onehot - probs).norm(dim=-1)
    else:
        mean, log_std = dist_params.chunk(2, dim=-1)
        output_grad = ((actions - mean) / log_std.exp().pow(2)).norm(dim=-1)
    return advantages.abs() * output_grad


def grad_norm_label(
    policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, chunk: int = 512
) -> torch.Tensor:
    """Per-sample ``||grad_theta A * log pi(a|s)||`` over all policy parameters, (B,)."""
    params = {name: p.detach() for name, p in policy.named_parameters()}

    def sample_objective(p: dict, o: torch.Tensor, a: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
        dist_params, _ = functional_call(policy, p, (o.unsqueeze(0),))
        return adv * policy.head.log_prob(dist_params, a.unsqueeze(0)).squeeze(0)

    per_sample = vmap(grad(sample_objective), in_dims=(None, 0, 0, 0))
    norms = []
    for start in range(0, obs.shape[0], chunk):
        part = slice(start, start + chunk)
        grads = per_sample(params, obs[part], actions[part], advantages[part])
        squared = sum(g.flatten(1).pow(2).sum(1) for g in grads.values())
        norms.append(squared.sqrt())
    return torch.cat(norms)


def compute_labels(
    kind: LabelKind,
    policy: ActorCritic,
    obs: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    dist_params: torch.Tensor,
) -> torch.Tensor:
    """Raw (un-normalised) importance labels of a rollout, (B,)."""
    if kind == "advantage":
        return advantages.abs()
    if kind == "policy_gradient":
        return policy_gradient_label(policy, dist_params, actions, advantages)
    if kind == "grad_norm":
        return grad_norm_label(policy, obs, actions, advantages)
    raise ValueError(f"unknown label kind {kind!r}")
