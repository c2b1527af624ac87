"""Gradient synchronisation across workers: dense all-reduce, or the seed's top-k fusion.

``GradientFusion.synchronize(params)`` (``DenseAllReduce`` or ``TopKFusion``, built by
``frugalrl.fusion.reducers.make_reducer`` as the gradient reducer ``distributed.kind`` names)
runs after ``loss.backward()`` on every worker and leaves the same gradient in every worker's
``p.grad``, so the optimisers stay in lock-step:

- ``dense``: ``all_reduce`` of the flat float32 gradient, divided by the world size.
- ``topk``: each worker packs the top ``k`` (share ``distributed.settings.share``) of (gradient +
  residual) per tensor (``frugalrl.fusion.topk``), ``all_gather`` of the packed buffers, and every worker decodes
  the mean. Then the seed's fusion: g_global = beta * g_global + (1 - beta) * mean, and a
  norm clip whose threshold decays over training (``clip * clip_decay ** step``; 0 = none).

What synchronisation costs, per worker:

- ``bytes_sent``: the payload handed to the collective, next to the float32 dense payload of the
  same gradients (``dense_bytes``).
- ``wire_bytes``: what a worker sends on the wire for the collective actually used, under the
  ring algorithms gloo and NCCL use: ``all_reduce`` moves ``2 (W - 1) / W`` times the payload
  per worker (reduce-scatter, then all-gather), ``all_gather`` ``(W - 1)`` times each worker's
  payload. So top-k's saving shrinks as workers are added: against dense it sends
  ``W * k_bytes / (2 * dense_bytes)`` of the bytes, 0.2 of them at W = 2 and k_bytes/dense 0.2,
  0.8 at W = 8, and more than dense past W = 10.
- ``element_ops``: element operations of the encode, reduce and decode (no matmul, so the
  FLOP counter sees none): dense 2n per step (flatten, divide) plus the ring reduction's
  ``(W - 1) / W * n`` adds; top-k ``5n + 3k`` to encode (residual add, magnitude, selection,
  residual update, the zero fill; gather, cast and scatter of the k kept) and ``W (2n + k)`` to
  decode (zero fill, scatter-add, mean), then ``2n`` momentum, ``2n`` norm clip when on. They
  join the run's meter as the ``train`` phase ``gradient_sync`` (1 FLOP per element operation).
- ``encode_s`` / ``comm_s`` / ``decode_s``: the seconds each part took.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

import torch
import torch.distributed as dist

from frugalrl.config import DistributedConfig
from frugalrl.fusion.topk import Layout, encode, fuse


class GradientFusion(ABC):
    """One gradient group's synchronisation; ``reducers.make_reducer`` builds the kind the config names."""

    def __init__(self, config: DistributedConfig, world_size: int):
        self.config = config
        self.world_size = world_size
        self.steps = 0
        self.bytes_sent = 0
        self.dense_bytes = 0
        self.wire_bytes = 0.0
        self.element_ops = 0.0
        self.seconds = {"encode": 0.0, "comm": 0.0, "decode": 0.0}

    def _timed(self, part: str, started: float) -> float:
        now = time.perf_counter()
        self.seconds[part] += now - started
        return now

    def synchronize(self, params: Any) -> None:
        """Replace every ``p.grad`` by the synchronised gradient (identical on every worker)."""
        params = [p for p in params if p.grad is not None]
        fused = self._combine([p.grad for p in params])
        for p, g in zip(params, fused, strict=True):
            p.grad.copy_(g.view_as(p.grad).to(p.grad.dtype))
        self.steps += 1

    @abstractmethod
    def _combine(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """Every worker's gradients in, the one gradient every worker applies out (flat per tensor)."""

    def summary(self) -> dict[str, float]:
        return {
            "bytes_sent": float(self.bytes_sent),
            "dense_equivalent_bytes": float(self.dense_bytes),
            "compression_ratio": self.dense_bytes / self.bytes_sent if self.bytes_sent else 1.0,
            "sync_steps": float(self.steps),
            "wire_bytes": float(self.wire_bytes),
            "element_ops": float(self.element_ops),
            **{f"{part}_s": round(s, 4) for part, s in self.seconds.items()},
        }


def collective_device() -> torch.device:
    """Where a collective's tensors must live: the current GPU for NCCL (it refuses CPU tensors), the CPU for gloo."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class DenseAllReduce(GradientFusion):
    """The baseline: the mean of the flat float32 gradients, through ``all_reduce``."""

    def _combine(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        started = time.perf_counter()
        flat = torch.cat([g.reshape(-1).float() for g in grads])
        n, w = flat.numel(), self.world_size
        self.bytes_sent += n * flat.element_size()
        self.dense_bytes += n * 4
        self.wire_bytes += 2 * (w - 1) / w * n * flat.element_size()
        self.element_ops += 2 * n + (w - 1) / w * n
        wire = flat.to(collective_device())
        started = self._timed("encode", started)
        dist.all_reduce(wire, op=dist.ReduceOp.SUM)
        started = self._timed("comm", started)
        flat = wire.to(flat.device) / self.world_size
        self._timed("decode", started)
        return list(flat.split([g.numel() for g in grads]))


class TopKFusion(GradientFusion):
    """The seed's fusion: top-k with residuals, mean of the gathered sparse gradients, momentum, decaying clip."""

    def __init__(self, config: DistributedConfig, world_size: int, share: float):
        super().__init__(config, world_size)
        self.share = share  # of each gradient tensor's entries, sent per step
        self.value_dtype = torch.float16 if config.value_dtype == "float16" else torch.float32
        self.layout: Layout | None = None
        self.residuals: list[torch.Tensor] = []
        self.momentum: list[torch.Tensor] | None = None

    def _combine(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        fused = self._topk(grads)
        beta = self.config.beta
        if self.momentum is None:
            self.momentum = [torch.zeros_like(f) for f in fused]
        for m, f in zip(self.momentum, fused, strict=True):
            m.mul_(beta).add_(f, alpha=1.0 - beta)
        fused = [m.clone() for m in self.momentum]
        n = sum(f.numel() for f in fused)
        self.element_ops += 2 * n + (2 * n if self.config.clip > 0 else 0)
        if self.config.clip > 0:
            threshold = self.config.clip * self.config.clip_decay**self.steps
            norm = torch.sqrt(sum((f**2).sum() for f in fused))
            if norm > threshold:
                fused = [f * (threshold / (norm + 1e-12)) for f in fused]
        return fused

    def _topk(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.layout is None:
            self.layout = Layout.for_tensors([g.numel() for g in grads], self.share, self.value_dtype)
            self.residuals = [torch.zeros(g.numel()) for g in grads]
        started = time.perf_counter()
        buffer = encode([g.detach().cpu() for g in grads], self.residuals, self.layout)
        n, k, w = sum(self.layout.numels), sum(self.layout.ks), self.world_size
        self.bytes_sent += buffer.numel()
        self.dense_bytes += self.layout.dense_nbytes
        self.wire_bytes += (w - 1) * buffer.numel()
        self.element_ops += 5 * n + 3 * k + w * (2 * n + k)
        wire = buffer.to(collective_device())  # encoded on the CPU, sent from where the backend reads
        gathered = [torch.empty_like(wire) for _ in range(self.world_size)]
        started = self._timed("encode", started)
        dist.all_gather(gathered, wire)
        started = self._timed("comm", started)
        fused = [f.to(grads[0].device) for f in fuse([g.cpu() for g in gathered], self.layout)]
        self._timed("decode", started)
        return fused
