"""SAC's gradient steps on its networks: the critics' targets, the critics' loss gradient, the actor's.

Two kinds, one interface (``SACStep``): ``AutogradSACStep`` is the reference (the modules' forward passes,
autograd's backward). ``FusedSACStep`` writes the same passes out for plain-MLP networks (Linear + ReLU layers,
as ``SACNetworks.build`` makes them):

- the twin critics run as one batched matmul per layer (``baddbmm`` on weights stacked on dim 0, the storage
  trick of ``frugalrl.algos.fused_mlp.stack_towers``; the target critics get their own stacks);
- no autograd graph is built: each forward keeps its layers' inputs and outputs, and the backward is the
  textbook one, into each parameter's ``.grad``;
- the actor's loss gradient is written in closed form. With ``pre = mean + std * eps`` the Gaussian term of
  log pi is ``-eps^2 / 2 - log_std - log(2 pi) / 2``, so its gradient is -1 into ``log_std`` and nothing into
  ``mean``; the tanh correction ``log(1 - tanh(pre)^2)`` gives ``-2 tanh(pre)`` into ``pre``; the critics
  pass ``dQ/da`` back through their (frozen) layers only, as the reference does by switching their weights'
  ``requires_grad`` off.

Why: one SAC gradient step is three passes over three 256-unit networks, and autograd's graph, engine and
gradient accumulation cost about as much as the arithmetic beside it on one core (docs/benchmarks.md,
"Where an off-policy gradient step's time goes"). The written-out step draws the same random numbers in
the same order; its gradients equal autograd's up to float rounding (the order of a few sums differs:
``tests/test_sac_step.py``), so a run does not train bit for bit as on the reference.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from frugalrl.algos.fused_mlp import stack_towers, tower_layers

if TYPE_CHECKING:
    from frugalrl.algos.sac import SquashedGaussianActor, TwinCritic

_LOG_2PI_HALF = 0.5 * math.log(2 * math.pi)


class SACStep(Protocol):
    def targets(
        self, next_obs: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, gamma: float, alpha: torch.Tensor
    ) -> torch.Tensor:
        """The critics' regression targets r + gamma (1 - d) (min_j Q'_j(s', a') - alpha log pi(a'|s')), (B,)."""

    def critic_forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Q_1(s, a) and Q_2(s, a), (B,) each; keeps what ``critic_backward`` needs."""

    def critic_backward(
        self, loss: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> None:
        """The gradient of ``loss`` = mean(weights ((q1 - targets)^2 + (q2 - targets)^2)) / 2 into the critics'
        ``.grad``."""

    def actor_backward(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss mean(alpha log pi(a|s) - min_j Q_j(s, a)), a ~ pi(s) reparameterised, and log pi (B,);
        its gradient into the actor's ``.grad`` (the critics' weights get none)."""


class AutogradSACStep:
    """The reference: the modules' forward passes and ``loss.backward()``."""

    def __init__(self, actor: SquashedGaussianActor, critic: TwinCritic, critic_target: TwinCritic):
        self.actor, self.critic, self.critic_target = actor, critic, critic_target
        self._critic_weights = [p for p in critic.parameters() if p.requires_grad]

    @torch.no_grad()
    def targets(
        self, next_obs: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, gamma: float, alpha: torch.Tensor
    ) -> torch.Tensor:
        next_actions, next_logprob = self.actor.sample(next_obs)
        q1, q2 = self.critic_target(next_obs, next_actions)
        return rewards + gamma * (1.0 - terminated) * (torch.min(q1, q2) - alpha * next_logprob)

    def critic_forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.critic(obs, actions)

    def critic_backward(
        self, loss: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> None:
        loss.backward()

    def actor_backward(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        new_actions, logprob = self.actor.sample(obs)
        # The gradient reaches the actor through the critics' inputs; their own weights' gradients would be
        # thrown away (the critic step zeroes them), so they are not computed at all.
        for weight in self._critic_weights:
            weight.requires_grad_(False)
        try:
            loss = (alpha * logprob - torch.min(*self.critic(obs, new_actions))).mean()
            loss.backward()
        finally:
            for weight in self._critic_weights:
                weight.requires_grad_(True)
        return loss.detach(), logprob.detach()


def _plain_linears(mlp: nn.Module) -> list[nn.Linear] | str:
    """The Linear layers of a plain ReLU MLP, or why it is not one (SAC's networks are ReLU)."""
    found = tower_layers(mlp)
    if isinstance(found, str):
        return found
    linears, activation = found
    return linears if activation is nn.ReLU else "the MLP's activations are not ReLU"


def _critic_linears(critic: nn.Module) -> tuple[list[nn.Linear], list[nn.Linear]] | str:
    if not isinstance(getattr(critic, "q1", None), nn.Module) or not isinstance(getattr(critic, "q2", None), nn.Module):
        return f"the critic is a {type(critic).__name__}, not a TwinCritic"
    towers = []
    for q in (critic.q1, critic.q2):
        if type(q) is not nn.Sequential or len(q) != 2 or type(q[1]) is not nn.Linear:
            return "a critic is not a plain MLP and a Linear head"
        found = _plain_linears(q[0])
        if isinstance(found, str):
            return found
        towers.append([*found, q[1]])
    if [m.weight.shape for m in towers[0]] != [m.weight.shape for m in towers[1]]:
        return "the twin critics differ in shape"
    return towers[0], towers[1]


def fused_unsupported(actor: nn.Module, critic: nn.Module, critic_target: nn.Module) -> str | None:
    """Why ``FusedSACStep`` cannot run these networks (None: it can)."""
    if not all(hasattr(actor, name) for name in ("torso", "mean", "log_std", "scale", "bias", "log_std_bounds")):
        return f"the actor is a {type(actor).__name__}, not a SquashedGaussianActor"
    found = _plain_linears(actor.torso)
    if isinstance(found, str):
        return found
    if type(actor.mean) is not nn.Linear or type(actor.log_std) is not nn.Linear:
        return "the actor's heads are wrapped (an adapter)"
    for net in (critic, critic_target):
        found = _critic_linears(net)
        if isinstance(found, str):
            return found
    params = [*actor.parameters(), *critic.parameters()]
    if not all(p.requires_grad for p in params):
        return "some parameters are frozen (autograd leaves their gradients out)"
    if any(p.dtype != torch.float32 for p in params):
        return "parameters are not float32"
    return None


class _StackedTwins:
    """The two critics' layers as (2, out, in) weights and (2, out) biases, and their forward pass."""

    def __init__(self, critic: TwinCritic):
        first, second = _critic_linears(critic)  # type: ignore[misc]
        self.critic, self.first, self.second = critic, first, second
        self._restack()

    def _restack(self) -> None:
        with torch.no_grad():
            self.weights, self.biases = stack_towers(self.critic, self.first, self.second)
        self._first_ptr = self.first[0].weight.data_ptr()

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's output for the input x (B, in): [(2, B, H1), ..., (2, B, 1)]; ReLU after all but the last."""
        if self.first[0].weight.data_ptr() != self._first_ptr:  # moved (``.to()``) or replaced: stack again
            self._restack()
        outs, h = [], x.unsqueeze(0).expand(2, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            if i < last:
                h = h.relu_()
            outs.append(h)
        return outs

    def input_gradient(self, outs: list[torch.Tensor], g_q: torch.Tensor, columns: slice) -> torch.Tensor:
        """d(sum_j g_q[j] . Q_j)/dx[:, columns] (B, len(columns)) for the layer outputs ``outs``; no weight
        gradients."""
        g_h = torch.bmm(g_q.unsqueeze(-1), self.weights[-1])  # (2, B, H_last)
        for i in range(len(self.weights) - 2, -1, -1):
            g_z = torch.ops.aten.threshold_backward(g_h, outs[i], 0)
            w = self.weights[i] if i else self.weights[0][:, :, columns]
            g_h = torch.bmm(g_z, w)
        return g_h.sum(0)

    def backward(self, x: torch.Tensor, outs: list[torch.Tensor], g_q: torch.Tensor) -> None:
        """The weight and bias gradients for dL/dQ = g_q (2, B), into each layer's ``.grad``."""
        g_z = g_q.unsqueeze(-1)  # (2, B, 1)
        for i in range(len(self.weights) - 1, -1, -1):
            if i < len(self.weights) - 1:
                g_z = torch.ops.aten.threshold_backward(g_z, outs[i], 0)
            if i:
                g_w = torch.bmm(g_z.transpose(1, 2), outs[i - 1])  # (2, out, in)
            else:  # x^T g_z is cheaper than a batched matmul over an expanded input
                g_w = torch.matmul(x.t(), g_z).transpose(1, 2).contiguous()
            g_b = g_z.sum(1)
            a, c = self.first[i], self.second[i]
            a.weight.grad, c.weight.grad = g_w[0], g_w[1]
            a.bias.grad, c.bias.grad = g_b[0], g_b[1]
            if i:
                g_z = torch.bmm(g_z, self.weights[i])


class FusedSACStep:
    """SAC's three passes written out for plain-MLP networks; gradients autograd's up to float rounding."""

    def __init__(self, actor: SquashedGaussianActor, critic: TwinCritic, critic_target: TwinCritic):
        why = fused_unsupported(actor, critic, critic_target)
        if why is not None:
            raise ValueError(f"the fused SAC step cannot run these networks: {why}")
        self.actor = actor
        self.torso: list[nn.Linear] = _plain_linears(actor.torso)  # type: ignore[assignment]
        self.critic = _StackedTwins(critic)
        self.critic_target = _StackedTwins(critic_target)
        self.obs_dim = self.critic.first[0].weight.shape[1] - actor.mean.weight.shape[0]
        self._x: torch.Tensor | None = None
        self._outs: list[torch.Tensor] = []

    def _policy(self, obs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """The torso's layer inputs (its output last), the Gaussian's mean, its log std before the clamp, and the
        noise of the reparameterised sample."""
        h = obs.flatten(1)
        ins = []
        for linear in self.torso:
            ins.append(h)
            h = torch.addmm(linear.bias, h, linear.weight.t()).relu_()
        ins.append(h)
        actor = self.actor
        mean = torch.addmm(actor.mean.bias, h, actor.mean.weight.t())
        log_std_raw = torch.addmm(actor.log_std.bias, h, actor.log_std.weight.t())
        noise = torch.randn_like(mean)  # the draw the reference makes, in the same order
        return ins, mean, log_std_raw, noise

    def _sample(
        self, mean: torch.Tensor, log_std_raw: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log pi, tanh(pre), std) for the reparameterised sample."""
        log_std = log_std_raw.clamp(*self.actor.log_std_bounds)
        std = log_std.exp()
        pre = torch.addcmul(mean, std, noise)
        squashed = torch.tanh(pre)
        action = torch.addcmul(self.actor.bias, squashed, self.actor.scale)
        # log N(pre; mean, std) = -noise^2/2 - log std - log(2 pi)/2; the tanh and rescaling's change of variables
        correction = 2 * (math.log(2) - pre - nn.functional.softplus(-2 * pre)) + torch.log(self.actor.scale)
        logprob = (noise.square().mul_(-0.5) - log_std - _LOG_2PI_HALF - correction).sum(-1)
        return action, logprob, squashed, std

    @torch.no_grad()
    def targets(
        self, next_obs: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, gamma: float, alpha: torch.Tensor
    ) -> torch.Tensor:
        _, mean, log_std_raw, noise = self._policy(next_obs)
        next_actions, next_logprob, *_ = self._sample(mean, log_std_raw, noise)
        q = self.critic_target.forward(torch.cat([next_obs.flatten(1), next_actions], dim=-1))[-1].squeeze(-1)
        return rewards + gamma * (1.0 - terminated) * (torch.minimum(q[0], q[1]) - alpha * next_logprob)

    @torch.no_grad()
    def critic_forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._x = torch.cat([obs.flatten(1), actions], dim=-1)
        self._outs = self.critic.forward(self._x)
        q = self._outs[-1].squeeze(-1)
        return q[0], q[1]

    @torch.no_grad()
    def critic_backward(
        self, loss: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> None:
        if self._x is None:
            raise RuntimeError("call critic_forward() before critic_backward()")
        # d/dq_j of mean(w ((q1 - t)^2 + (q2 - t)^2)) / 2 = w (q_j - t) / B
        g_q = (self._outs[-1].squeeze(-1) - targets).mul_(weights / len(targets))
        self.critic.backward(self._x, self._outs, g_q)
        self._x, self._outs = None, []

    @torch.no_grad()
    def actor_backward(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ins, mean, log_std_raw, noise = self._policy(obs)
        action, logprob, squashed, std = self._sample(mean, log_std_raw, noise)
        outs = self.critic.forward(torch.cat([obs.flatten(1), action], dim=-1))
        q = outs[-1].squeeze(-1)
        batch = len(obs)
        loss = (alpha * logprob - torch.minimum(q[0], q[1])).mean()

        # dL/dQ_j: -1/B to the smaller critic, split evenly on ties (torch.minimum's backward)
        first = (q[0] < q[1]).float().add_((q[0] == q[1]).float(), alpha=0.5)
        g_q = torch.stack([first, 1.0 - first]).mul_(-1.0 / batch)
        g_action = self.critic.input_gradient(outs, g_q, slice(self.obs_dim, None))
        g_logprob = alpha / batch  # dL/dlog pi per sample
        scale = self.actor.scale
        # through action = tanh(pre) scale + bias, and log pi's -log(1 - tanh(pre)^2) term (gradient 2 tanh(pre))
        g_pre = (g_action * scale).mul_(1.0 - squashed.square()).add_(2.0 * g_logprob * squashed)
        low, high = self.actor.log_std_bounds
        inside = (log_std_raw >= low) & (log_std_raw <= high)  # clamp's backward
        g_log_std = (g_pre * std * noise - g_logprob).mul_(inside)

        heads = self.actor.mean, self.actor.log_std
        h = ins[-1]
        for head, g in zip(heads, (g_pre, g_log_std), strict=True):  # dL/dmean = dL/dpre
            head.weight.grad = g.t().mm(h)
            head.bias.grad = g.sum(0)
        g_h = torch.addmm(g_pre.mm(heads[0].weight), g_log_std, heads[1].weight)
        for i in range(len(self.torso) - 1, -1, -1):
            linear = self.torso[i]
            g_z = torch.ops.aten.threshold_backward(g_h, ins[i + 1], 0)
            linear.weight.grad = g_z.t().mm(ins[i])
            linear.bias.grad = g_z.sum(0)
            if i:
                g_h = g_z.mm(linear.weight)
        return loss, logprob


def build_sac_step(actor: SquashedGaussianActor, critic: TwinCritic, critic_target: TwinCritic, fused: bool) -> SACStep:
    """``FusedSACStep`` where ``fused`` and the networks allow it, else the autograd reference."""
    if fused and fused_unsupported(actor, critic, critic_target) is None:
        return FusedSACStep(actor, critic, critic_target)
    return AutogradSACStep(actor, critic, critic_target)
