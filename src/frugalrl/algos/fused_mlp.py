"""A hand-fused PPO step for the plain-MLP actor-critic: forward and backward written out.

Why: on a 64x64 MLP with minibatch 256 the arithmetic of one step is about 14 MFLOPs
(a fraction of a millisecond on one core), but eager autograd spends several times that in
per-operation overhead: ~150 small operations, autograd bookkeeping, module calls. Here

- the actor and critic towers (same widths, separate weights) run as one batched matmul
  per layer (``baddbmm`` on stacked weights), halving the operation count;
- the loss gradient with respect to the head outputs is written in closed form (softmax or
  Gaussian log-likelihood, clipped surrogate, value MSE, entropy), so no autograd graph is
  built and no backward engine runs;
- the backward pass through the towers is the textbook one, batched the same way.

The gradients land in each parameter's ``.grad``, so clipping, the optimizer and its state
are the learner's, unchanged. Results match the autograd step to float rounding
(``tests/test_ppo_step.py``).

Notation: L layers per tower, towers stacked on dim 0 (0 = actor, 1 = critic), k samples.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from frugalrl.algos.ppo_step import Minibatch, StepOutput
from frugalrl.config import PPOConfig
from frugalrl.cost import count_flops
from frugalrl.nets.heads import _LOG_SQRT_2PI, CategoricalHead, GaussianHead
from frugalrl.nets.policy import ActorCritic, ActOutput
from frugalrl.nets.torsos import MLP

_ACTIVATIONS = (nn.Tanh, nn.ReLU)


def tower_layers(tower: nn.Module) -> tuple[list[nn.Linear], type[nn.Module]] | str:
    """The Linear layers and the activation of a plain MLP tower, or why it is not one."""
    if type(tower) is not MLP:
        return f"torso {type(tower).__name__} is not a plain MLP"
    modules = list(tower.body)
    linears = modules[0::2]
    acts = modules[1::2]
    if len(linears) != len(acts) or any(type(m) is not nn.Linear for m in linears):
        return "the MLP is not Linear + activation pairs (fractal or residual blocks, or an adapter)"
    kinds = {type(a) for a in acts}
    if len(kinds) != 1 or not issubclass(next(iter(kinds)), _ACTIVATIONS):
        return "the MLP's activations are not one of tanh, relu"
    return linears, next(iter(kinds))


def fused_unsupported(policy: ActorCritic) -> str | None:
    """None when ``FusedMLPStep`` can run this policy, else the reason it cannot."""
    if type(policy) is not ActorCritic:
        return f"the policy is a {type(policy).__name__}, not a plain ActorCritic"
    if policy.critic is None:
        return "the actor and critic share a torso (CNN policy)"
    actor = tower_layers(policy.actor)
    critic = tower_layers(policy.critic)
    for found in (actor, critic):
        if isinstance(found, str):
            return found
    (a_layers, a_act), (c_layers, c_act) = actor, critic  # type: ignore[misc]
    if a_act is not c_act or [m.weight.shape for m in a_layers] != [m.weight.shape for m in c_layers]:
        return "actor and critic towers differ in shape"
    head = policy.head
    if type(head) not in (CategoricalHead, GaussianHead):
        return f"head {type(head).__name__} is not categorical or Gaussian"
    out_layer = head.logits if isinstance(head, CategoricalHead) else head.mean
    if type(out_layer) is not nn.Linear or type(policy.value) is not nn.Linear:
        return "the head or value layer is wrapped (an adapter)"
    params = list(policy.parameters())
    if any(p.dtype != torch.float32 for p in params):
        return "parameters are not float32"
    return None


def single_threaded_blas() -> None:
    """NumPy's BLAS to one thread for this process: the acting matmuls here are at most 8 x 256 x 256,
    far too small to gain from threads, and threads that wait for a busy core cost far more. Measured
    on 2 cores with other runs going: a (2, 8, 256) x (2, 256, 256) matmul took 3.8 ms with OpenBLAS's
    2 threads and 0.17 ms with one, and acting was 65% of a latent Atari run's time. Results are the
    same either way (the threads split the output, not the sums)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


class FusedMLPStep:
    """Forward and hand-written backward of the PPO loss for a plain-MLP ``ActorCritic``."""

    mode = "fused"

    def __init__(self, policy: ActorCritic, hp: PPOConfig):
        why = fused_unsupported(policy)
        if why is not None:
            raise ValueError(f"fused PPO step: {why}")
        self.policy = policy
        self.hp = hp
        self.actor_layers, act = tower_layers(policy.actor)  # type: ignore[misc]
        self.critic_layers, _ = tower_layers(policy.critic)  # type: ignore[misc]
        self.tanh = act is nn.Tanh
        self.discrete = isinstance(policy.head, CategoricalHead)
        self.out_layer: nn.Linear = policy.head.logits if self.discrete else policy.head.mean
        self._restack()
        single_threaded_blas()

    def _check_stacked(self) -> None:
        if self.actor_layers[0].weight.data_ptr() != self._first_ptr:  # moved (``.to()``): stack again
            self._restack()

    def _restack(self) -> None:
        # Outside inference mode (the first call may come from a rollout): parameters must stay normal tensors.
        with torch.inference_mode(False), torch.no_grad():
            self.weights, self.biases = stack_towers(self.policy, self.actor_layers, self.critic_layers)
        self._first_ptr = self.actor_layers[0].weight.data_ptr()
        if self.weights[0].device.type == "cpu":  # NumPy views share memory: the optimizer's updates show
            head = self.policy.head
            log_std = head.log_std.detach().numpy() if not self.discrete else None
            self._numpy_views = (
                [
                    (w.detach().numpy().transpose(0, 2, 1), b.detach().numpy()[:, None, :])
                    for w, b in zip(self.weights, self.biases, strict=True)
                ],
                (
                    self.out_layer.weight.detach().numpy().T,
                    self.out_layer.bias.detach().numpy(),
                    self.policy.value.weight.detach().numpy()[0],
                    self.policy.value.bias.detach().numpy(),
                    log_std,
                ),
            )

    def _towers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Both towers' activations, layer by layer: [input (k, in), hidden_1 (2, k, H1), ...]."""
        self._check_stacked()
        flat = self.policy.standardise(x).reshape(len(x), -1)
        out = [flat]  # kept 2-D: both towers read the same input
        h = flat.unsqueeze(0).expand(2, -1, -1)
        for w, b in zip(self.weights, self.biases, strict=True):
            if self.tanh:  # tanh(z) = 2 sigmoid(2z) - 1: sigmoid is ~3x faster than tanh on CPU
                h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2), beta=2.0, alpha=2.0).sigmoid_()
                h = h.mul_(2.0).sub_(1.0)
            else:
                h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2)).relu_()
            out.append(h)
        return out

    def act_flops(self, obs: torch.Tensor) -> int:
        """FLOPs of ``act(obs)``: NumPy's matmuls are invisible to torch's counter, so the same network is
        counted through ``ActorCritic.act`` (same layers, same sizes), with the random state put back."""
        state = torch.get_rng_state()
        try:
            with torch.no_grad():
                flops, _ = count_flops(lambda: self.policy.act(obs))
        finally:
            torch.set_rng_state(state)
        return flops

    def act(self, obs: torch.Tensor) -> ActOutput:
        """Sample actions for a rollout step. On the CPU the few small matmuls run in NumPy, whose
        per-call overhead is a fraction of torch's at 8 x 64; random draws still come from torch's
        generator (the one a checkpoint saves), in the same amounts as ``ActorCritic.act``."""
        if obs.device.type != "cpu":
            with torch.no_grad():
                return self.policy.act(obs)
        self._check_stacked()
        h = self.policy.standardise(obs).numpy().reshape(len(obs), -1)
        layers, (out_w, out_b, value_w, value_b, log_std) = self._numpy_views
        for w_t, b in layers:
            z = np.matmul(h, w_t)  # (2, k, out); layer 0 broadcasts the input
            z += b
            h = np.tanh(z, out=z) if self.tanh else np.maximum(z, 0.0, out=z)
        out = h[0] @ out_w + out_b
        value = h[1] @ value_w + value_b
        k = len(out)
        if self.discrete:
            shifted = out - out.max(axis=1, keepdims=True)
            exp = np.exp(shifted)
            total = exp.sum(axis=1, keepdims=True)
            logp = shifted - np.log(total)
            cdf = np.cumsum(exp / total, axis=1)
            u = torch.rand((k, 1)).numpy() * cdf[:, -1:]
            action = np.minimum((cdf <= u).sum(axis=1), cdf.shape[1] - 1)
            logprob = logp[np.arange(k), action]
            params = logp
        else:
            noise = torch.randn((k, out.shape[1])).numpy()
            action = out + np.exp(log_std) * noise
            logprob = (-0.5 * noise * noise - log_std - _LOG_SQRT_2PI).sum(axis=1)
            params = np.concatenate([out, np.broadcast_to(log_std, out.shape)], axis=1)
        return ActOutput(
            torch.from_numpy(np.ascontiguousarray(action)),
            torch.from_numpy(np.ascontiguousarray(logprob, dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(params, dtype=np.float32)),
        )

    @torch.no_grad()
    def forward(self, mb: Minibatch, clip: float) -> StepOutput:
        hp = self.hp
        inputs = self._towers(mb.obs)
        feat = inputs[-1]  # (2, k, H)
        out = torch.addmm(self.out_layer.bias, feat[0], self.out_layer.weight.t())  # (k, A) logits or means
        value_layer = self.policy.value
        value = torch.addmm(value_layer.bias, feat[1], value_layer.weight.t()).squeeze(-1)  # (k,)

        k = len(mb)
        weights = mb.weights
        inv_d = 1.0 / mb.denominator  # d(weighted mean) / d(term_i) = w_i / denominator

        # Log-likelihood of the taken actions.
        if self.discrete:
            logp = torch.log_softmax(out, dim=-1)
            probs = logp.exp()
            taken = mb.actions.long().unsqueeze(1)
            newlogprob = logp.gather(1, taken).squeeze(1)
            entropy = -(probs * logp).sum(-1)
        else:
            log_std = self.policy.head.log_std  # (A,)
            std = log_std.exp()
            z = (mb.actions - out) / std
            newlogprob = (-0.5 * z.pow(2) - log_std - _LOG_SQRT_2PI).sum(-1)
            entropy = (log_std + 0.5 + _LOG_SQRT_2PI).sum().expand(k)

        logratio = newlogprob - mb.old_logprobs
        ratio = logratio.exp()
        adv = mb.advantages
        surr1 = adv * ratio
        surr2 = adv * ratio.clamp(1 - clip, 1 + clip)
        surrogate = torch.min(surr1, surr2)  # the policy term is -surrogate
        # d(policy term) / d(newlogprob): -adv * ratio where the unclipped branch is taken, else 0.
        g_logprob = surr1.mul(surr1 <= surr2).mul_(-inv_d)

        diff = value - mb.returns
        if hp.clip_vloss:
            delta = value - mb.old_values
            clipped_diff = mb.old_values + delta.clamp(-clip, clip) - mb.returns
            t1, t2 = diff.pow(2), clipped_diff.pow(2)
            value_term = torch.max(t1, t2)
            inside = (delta.abs() <= clip).to(diff.dtype)
            g_value = torch.where(t1 >= t2, diff, clipped_diff * inside)
        else:
            value_term = diff * diff
            g_value = diff
        g_value = g_value * (2.0 * hp.vf_coef * inv_d)
        if weights is not None:
            g_logprob = g_logprob * weights
            g_value = g_value * weights

        # Statistics in one reduction: weighted means of the loss terms, plain means of KL and clipping.
        ratio_m1 = ratio - 1
        rows = torch.stack(
            [-surrogate, value_term, entropy, ratio_m1 - logratio, (ratio_m1.abs() > clip).to(ratio.dtype)]
        )  # (5, k)
        if weights is not None:
            rows[:3] *= weights
        stats = rows.sum(1) * torch.tensor([inv_d, inv_d, inv_d, 1.0 / k, 1.0 / k], device=rows.device)
        loss = stats[0] + hp.vf_coef * stats[1] - hp.ent_coef * stats[2]

        if self.discrete:
            # d logp_a / d logits = onehot(a) - p;  d entropy / d logits = -p * (logp + H)
            g_col = g_logprob.unsqueeze(1)
            g_out = (probs * -g_col).scatter_add_(1, taken, g_col)
            if hp.ent_coef:
                g_ent = (hp.ent_coef * inv_d) * (weights if weights is not None else torch.ones_like(entropy))
                g_out += g_ent.unsqueeze(1) * probs * (logp + entropy.unsqueeze(1))
            g_log_std = None
        else:
            # d logp / d mean = z / std;  d logp / d log_std = z^2 - 1;  d entropy / d log_std = 1
            g_out = g_logprob.unsqueeze(1) * z / std
            weight_sum = float(k) if weights is None else weights.sum()
            g_log_std = (g_logprob.unsqueeze(1) * (z.pow(2) - 1)).sum(0) - hp.ent_coef * inv_d * weight_sum
        return StepOutput(loss, stats, (inputs, g_out, g_value, g_log_std))

    # ------------------------------------------------------------------ backward
    @torch.no_grad()
    def backward(self, out: StepOutput) -> None:
        inputs, g_out, g_value, g_log_std = out.cache
        feat = inputs[-1]
        value_layer = self.policy.value
        self.out_layer.weight.grad = g_out.t() @ feat[0]
        self.out_layer.bias.grad = g_out.sum(0)
        value_layer.weight.grad = g_value.unsqueeze(0) @ feat[1]
        value_layer.bias.grad = g_value.sum().reshape(1)
        if g_log_std is not None:
            self.policy.head.log_std.grad = g_log_std

        # Gradient at the last hidden layer of each tower: (2, k, H).
        g_h = torch.stack([g_out @ self.out_layer.weight, g_value.unsqueeze(1) @ value_layer.weight])
        for layer in reversed(range(len(self.weights))):
            h_out = inputs[layer + 1]
            if self.tanh:
                g_z = torch.ops.aten.tanh_backward(g_h, h_out)  # g * (1 - h^2) in one kernel
            else:
                g_z = torch.ops.aten.threshold_backward(g_h, h_out, 0.0)
            if layer:
                g_w = torch.bmm(g_z.transpose(1, 2), inputs[layer])  # (2, out, in)
            else:  # x^T g_z is cheaper than a batched matmul over an expanded input
                g_w = torch.matmul(inputs[0].t(), g_z).transpose(1, 2).contiguous()
            g_b = g_z.sum(1)  # (2, out)
            a, c = self.actor_layers[layer], self.critic_layers[layer]
            a.weight.grad, c.weight.grad = g_w[0], g_w[1]
            a.bias.grad, c.bias.grad = g_b[0], g_b[1]
            if layer:
                g_h = torch.bmm(g_z, self.weights[layer])


def stack_towers(
    policy: nn.Module, actor: list[nn.Linear], critic: list[nn.Linear]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Move each layer pair's weights into one (2, out, in) tensor (and biases into (2, out)): the actor's and
    critic's towers here, SAC's twin critics in ``frugalrl.algos.sac_step``.

    The parameters stay the same objects (optimizer state and checkpoints are untouched); their
    storage becomes a slice of the stacked tensor, so a step needs no copy to batch the towers.
    The stacks are kept on the policy: a second learner sharing it (the latent curriculum's
    real and virtual sources) reuses them instead of moving the parameters again.
    """
    pairs = [(getattr(a, name), getattr(c, name)) for a, c in zip(actor, critic, strict=True) for name in _NAMES]
    kept = getattr(policy, _STACKS, None)
    if (
        kept is not None
        and len(kept) == len(pairs)
        and all(_is_stack(t, a, c) for t, (a, c) in zip(kept, pairs, strict=True))
    ):
        stacks = kept
    else:
        stacks = []
        for pa, pc in pairs:
            stacked = torch.stack([pa.data, pc.data])
            pa.data, pc.data = stacked[0], stacked[1]
            stacks.append(stacked)
        object.__setattr__(policy, _STACKS, stacks)  # a plain attribute: not a buffer, not in state_dict
    return stacks[0::2], stacks[1::2]


_NAMES = ("weight", "bias")
_STACKS = "_fused_tower_stacks"


def _is_stack(stacked: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> bool:
    return first.data_ptr() == stacked[0].data_ptr() and second.data_ptr() == stacked[1].data_ptr()
