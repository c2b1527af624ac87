"""Gradient clipping and the Adam step without torch's per-call plumbing.

At CartPole sizes ``nn.utils.clip_grad_norm_`` (about 180 us) and ``Adam.step`` (about 230 us)
cost more than the arithmetic they do (measured on this project's 2-core CI machine; see
docs/benchmarks.md, "Where PPO's time goes"). ``ClipAndStep`` computes exactly the same
numbers with the same kernels: the clip is ``clip_grad_norm_``'s foreach formula, and the
step calls the fused Adam kernel that ``Adam(fused=True).step()`` itself calls, on the
optimizer's own state tensors, so checkpoints and ``optimizer.state_dict()`` are unchanged.
Anything else (another optimizer, AMSGrad, weight decay, several parameter groups, a
parameter without a gradient, a torch without the kernel) takes the ordinary path.
"""

from __future__ import annotations

import torch
from torch import nn


class ClipAndStep:
    """``zero_grad()``, then after backward ``step(max_grad_norm)``: clip the total norm (``None``: no clipping,
    as SAC steps), update."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter]):
        self.optimizer = optimizer
        self.params = params
        self.direct = _direct_adam_possible(optimizer, params)
        self._state_of: object = None  # the optimizer.state the lists below were read from
        self._lists: tuple[list[torch.Tensor], ...] = ()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self, max_grad_norm: float | None) -> None:
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            if max_grad_norm is not None:
                nn.utils.clip_grad_norm_(self.params, max_grad_norm)
            self.optimizer.step()
            return
        if max_grad_norm is not None:  # clip_grad_norm_'s own formula: 2-norm of the per-tensor 2-norms, capped at 1
            norms = torch._foreach_norm(grads, 2.0)
            total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
            coef = torch.clamp(max_grad_norm / (total + 1e-6), max=1.0)
            torch._foreach_mul_(grads, coef)
        state = self.optimizer.state
        if not self.direct or not state:  # the first step creates Adam's state
            self.optimizer.step()
            return
        if self._state_of is not state:  # first direct step, or load_state_dict() replaced the state
            states = [state[p] for p in self.params]
            self._lists = tuple([s[key] for s in states] for key in ("exp_avg", "exp_avg_sq", "step"))
            self._state_of = state
        exp_avgs, exp_avg_sqs, steps = self._lists
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            self.params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            amsgrad=False,
            lr=float(group["lr"]),
            beta1=float(beta1),
            beta2=float(beta2),
            weight_decay=0.0,
            eps=float(group["eps"]),
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )


def _direct_adam_possible(optimizer: torch.optim.Optimizer, params: list[nn.Parameter]) -> bool:
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    same_params = [id(p) for p in group["params"]] == [id(p) for p in params]
    plain = not group["amsgrad"] and group["weight_decay"] == 0 and not group["maximize"]
    devices = {p.device.type for p in params}
    return (
        bool(group.get("fused"))
        and same_params
        and plain
        and not group.get("decoupled_weight_decay", False)
        and not isinstance(group["lr"], torch.Tensor)
        and devices <= {"cpu", "cuda"}
        and hasattr(torch, "_fused_adam_")
        and all(p.dtype == torch.float32 for p in params)
    )
