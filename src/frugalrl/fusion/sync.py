"""Gradient synchronisation across workers: dense all-reduce, or the seed's top-k fusion.

``GradientFusion.synchronize(params)`` (``DenseAllReduce`` or ``TopKFusion``, built by
``make_fusion``) runs after ``loss.backward()`` on every worker and
leaves the same gradient in every worker's ``p.grad``, so the optimisers stay in lock-step:

- ``dense``: ``all_reduce`` of the flat float32 gradient, divided by the world size.
- ``topk``: each worker packs the top ``k`` of (gradient + residual) per tensor
  (``frugalrl.fusion.topk``), ``all_gather`` of the packed buffers, and every worker decodes
  the mean. Then the seed's fusion: g_global = beta * g_global + (1 - beta) * mean, and a
  norm clip whose threshold decays over training (``clip * clip_decay ** step``; 0 = none).

Bytes are counted from the tensors handed to the collective (``bytes_sent``), next to the
float32 dense payload of the same gradients (``dense_bytes``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
import torch.distributed as dist

from frugalrl.config import DistributedConfig
from frugalrl.fusion.topk import Layout, encode, fuse


class GradientFusion(ABC):
    """One gradient group's synchronisation; ``make_fusion`` builds the kind the config names."""

    def __init__(self, config: DistributedConfig, world_size: int):
        self.config = config
        self.world_size = world_size
        self.steps = 0
        self.bytes_sent = 0
        self.dense_bytes = 0

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
        }


def collective_device() -> torch.device:
    """Where a collective's tensors must live: the current GPU for NCCL (it refuses CPU tensors), the CPU for gloo."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class DenseAllReduce(GradientFusion):
    """The baseline: the mean of the flat float32 gradients, through ``all_reduce``."""

    def _combine(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        flat = torch.cat([g.reshape(-1).float() for g in grads])
        self.bytes_sent += flat.numel() * flat.element_size()
        self.dense_bytes += flat.numel() * 4
        wire = flat.to(collective_device())
        dist.all_reduce(wire, op=dist.ReduceOp.SUM)
        flat = wire.to(flat.device) / self.world_size
        return list(flat.split([g.numel() for g in grads]))


class TopKFusion(GradientFusion):
    """The seed's fusion: top-k with residuals, mean of the gathered sparse gradients, momentum, decaying clip."""

    def __init__(self, config: DistributedConfig, world_size: int):
        super().__init__(config, world_size)
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
        if self.config.clip > 0:
            threshold = self.config.clip * self.config.clip_decay**self.steps
            norm = torch.sqrt(sum((f**2).sum() for f in fused))
            if norm > threshold:
                fused = [f * (threshold / (norm + 1e-12)) for f in fused]
        return fused

    def _topk(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.layout is None:
            self.layout = Layout.for_tensors([g.numel() for g in grads], self.config.topk, self.value_dtype)
            self.residuals = [torch.zeros(g.numel()) for g in grads]
        buffer = encode([g.detach().cpu() for g in grads], self.residuals, self.layout)
        self.bytes_sent += buffer.numel()
        self.dense_bytes += self.layout.dense_nbytes
        wire = buffer.to(collective_device())  # encoded on the CPU, sent from where the backend reads
        gathered = [torch.empty_like(wire) for _ in range(self.world_size)]
        dist.all_gather(gathered, wire)
        return [f.to(grads[0].device) for f in fuse([g.cpu() for g in gathered], self.layout)]


FUSIONS: dict[str, type[GradientFusion]] = {"dense": DenseAllReduce, "topk": TopKFusion}


def make_fusion(config: DistributedConfig, world_size: int) -> GradientFusion:
    """The synchronisation ``distributed.mode`` names."""
    return FUSIONS[config.mode](config, world_size)
