"""DQN's gradient step on Q(s, a): the forward pass, then the loss's gradient into each parameter's ``.grad``.

Two kinds, one interface (``QStep``): ``AutogradQStep`` is the reference (the module's forward, autograd's
backward). ``FusedQStep`` writes the same pass out for a plain MLP Q-network (Linear + ReLU/Tanh layers, then
the Q head): the forward runs without building an autograd graph, keeping each layer's input and output, and
the backward is the textbook one.

Why: at DQN's usual sizes (two 256-unit layers, a minibatch of 64-256) the arithmetic of a step is a fraction
of a millisecond on one core, and autograd's graph, engine and gradient accumulation cost a sizeable share
beside it (docs/benchmarks.md, "Where an off-policy gradient step's time goes").

The fused backward calls the kernels autograd's formulas call, with the same operands in the same layouts
(``threshold_backward`` / ``tanh_backward``, ``smooth_l1_loss_backward``, the weight gradient as
``(grad^T input)`` and the input gradient as ``grad W``, the bias gradient as a sum over the batch), so the
gradients are bit for bit autograd's (``tests/test_dqn_step.py``) and a run trains exactly as on the reference.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from frugalrl.nets.qnet import QNetwork
from frugalrl.nets.torsos import MLP

# activation -> (forward, backward from the layer's output): what nn.ReLU / nn.Tanh and their autograd nodes call
_ACTIVATIONS = {
    nn.ReLU: (torch.relu, lambda grad, out: torch.ops.aten.threshold_backward(grad, out, 0)),
    nn.Tanh: (torch.tanh, torch.ops.aten.tanh_backward),
}


class QStep(Protocol):
    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(s, a) for the batch, (B,); keeps what ``backward`` needs."""

    def backward(self, loss: torch.Tensor, q: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> None:
        """The gradient of ``loss`` = mean(weights * smooth_l1(q, targets)) into every parameter's ``.grad``."""


class AutogradQStep:
    """The reference: ``QNetwork.forward`` and ``loss.backward()``."""

    def __init__(self, net: QNetwork):
        self.net = net

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.net(obs).gather(1, actions[:, None]).squeeze(1)

    def backward(self, loss: torch.Tensor, q: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> None:
        loss.backward()


def fused_unsupported(net: nn.Module) -> str | None:
    """Why ``FusedQStep`` cannot run ``net`` (None: it can)."""
    if type(net) is not QNetwork:
        return f"{type(net).__name__} is not a QNetwork"
    if type(net.torso) is not MLP:
        return f"torso {type(net.torso).__name__} is not a plain MLP"
    body = list(net.torso.body)
    kinds = [type(layer) for layer in body]
    if len(body) % 2 or any(k is not nn.Linear for k in kinds[::2]) or any(k not in _ACTIVATIONS for k in kinds[1::2]):
        return f"torso layers {[k.__name__ for k in kinds]} are not Linear + ReLU/Tanh pairs"
    if not all(p.requires_grad for p in net.parameters()):
        return "some parameters are frozen (autograd leaves their gradients out)"
    return None


class FusedQStep:
    """The plain-MLP Q-network's step written out; gradients bit for bit autograd's."""

    def __init__(self, net: QNetwork):
        why = fused_unsupported(net)
        if why is not None:
            raise ValueError(f"the fused DQN step cannot run this network: {why}")
        body = list(net.torso.body)
        # (linear, (activation forward, its backward) or None for the Q head)
        self.layers: list[tuple[nn.Linear, tuple | None]] = [
            (body[i], _ACTIVATIONS[type(body[i + 1])]) for i in range(0, len(body), 2)
        ]
        self.layers.append((net.q, None))
        self._inputs: list[torch.Tensor] = []
        self._outputs: list[torch.Tensor] = []
        self._all_q: torch.Tensor | None = None
        self._index: torch.Tensor | None = None

    @torch.no_grad()
    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        h = obs.flatten(1)
        self._inputs, self._outputs = [], []
        for linear, activation in self.layers:
            self._inputs.append(h)
            h = torch.addmm(linear.bias, h, linear.weight.t())  # what F.linear runs for a 2-D input
            if activation is not None:
                h = activation[0](h)
            self._outputs.append(h)
        self._all_q, self._index = h, actions[:, None]
        return h.gather(1, self._index).squeeze(1)

    @torch.no_grad()
    def backward(self, loss: torch.Tensor, q: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> None:
        if self._all_q is None or self._index is None:
            raise RuntimeError("call forward() before backward()")
        batch = q.shape[0]
        # mean, then the weights, then the Huber loss (beta 1): autograd's MeanBackward, MulBackward and
        # SmoothL1LossBackward in that order
        grad = torch.ones((), dtype=q.dtype).expand(batch).div(batch) * weights
        grad = torch.ops.aten.smooth_l1_loss_backward(grad, q, targets, 0, 1.0)
        grad = torch.zeros_like(self._all_q).scatter_(1, self._index, grad.unsqueeze(1))  # gather's backward
        for i in range(len(self.layers) - 1, -1, -1):
            linear, activation = self.layers[i]
            if activation is not None:
                grad = activation[1](grad, self._outputs[i])
            linear.weight.grad = grad.t().mm(self._inputs[i])
            linear.bias.grad = grad.sum(0)
            if i > 0:  # the first layer's input is the observation: no gradient
                grad = grad.mm(linear.weight)
        self._inputs, self._outputs, self._all_q = [], [], None


def build_q_step(net: QNetwork, fused: bool) -> QStep:
    """``FusedQStep`` where ``fused`` and the network allow it, else the autograd reference."""
    return FusedQStep(net) if fused and fused_unsupported(net) is None else AutogradQStep(net)
