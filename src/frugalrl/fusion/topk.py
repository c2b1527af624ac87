"""Top-k gradient sparsification with error feedback: what one worker sends, as bytes.

Per tensor, the worker adds its residual (what it did not send before) to the fresh gradient,
keeps the ``ceil(k * numel)`` entries largest in magnitude, and packs them as (index, value)
pairs into one flat ``uint8`` buffer: indices as int16 when the tensor has at most 32,767
entries (int32 otherwise), values as float32 or float16. The residual becomes everything not
delivered: the entries left out, and the rounding of the values that were sent (Deep Gradient
Compression's local accumulation, Lin et al. 2018). So over steps, sent + residual adds up to
the sum of the raw gradients: nothing is lost, only delayed.

Every worker's buffer has the same length (k is fixed per tensor), which is what
``all_gather`` needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

INT16_MAX = 32_767


@dataclass(frozen=True)
class Layout:
    """Where each tensor's (indices, values) sit in the packed buffer."""

    numels: tuple[int, ...]
    ks: tuple[int, ...]
    index_dtypes: tuple[torch.dtype, ...]
    value_dtype: torch.dtype

    @classmethod
    def for_tensors(cls, numels: list[int], fraction: float, value_dtype: torch.dtype) -> Layout:
        ks = tuple(min(n, max(1, math.ceil(fraction * n))) for n in numels)
        index_dtypes = tuple(torch.int16 if n <= INT16_MAX else torch.int32 for n in numels)
        return cls(tuple(numels), ks, index_dtypes, value_dtype)

    @property
    def nbytes(self) -> int:
        value = torch.empty(0, dtype=self.value_dtype).element_size()
        pairs = zip(self.ks, self.index_dtypes, strict=True)
        return sum(k * (torch.empty(0, dtype=d).element_size() + value) for k, d in pairs)

    @property
    def dense_nbytes(self) -> int:
        """What a float32 all-reduce payload of the same tensors weighs."""
        return 4 * sum(self.numels)


def encode(grads: list[torch.Tensor], residuals: list[torch.Tensor], layout: Layout) -> torch.Tensor:
    """Pack the top-k of (grad + residual) per tensor into one uint8 buffer; update residuals in place."""
    chunks = []
    for grad, residual, k, index_dtype in zip(grads, residuals, layout.ks, layout.index_dtypes, strict=True):
        corrected = grad.reshape(-1).float() + residual
        idx = corrected.abs().topk(k, sorted=False).indices
        values = corrected[idx].to(layout.value_dtype)
        sent = torch.zeros_like(corrected)
        sent[idx] = values.float()  # what the others will decode, rounding included
        residual.copy_(corrected - sent)
        chunks += [idx.to(index_dtype).view(torch.uint8), values.contiguous().view(torch.uint8)]
    return torch.cat(chunks)


def decode(buffer: torch.Tensor, layout: Layout) -> list[torch.Tensor]:
    """The dense float32 tensors (flat) one worker's buffer stands for."""
    out, offset = [], 0
    value_size = torch.empty(0, dtype=layout.value_dtype).element_size()
    for numel, k, index_dtype in zip(layout.numels, layout.ks, layout.index_dtypes, strict=True):
        index_size = torch.empty(0, dtype=index_dtype).element_size()
        # clone: a slice at an odd byte offset cannot be viewed as a wider dtype in place
        idx = buffer[offset : offset + k * index_size].clone().view(index_dtype).long()
        offset += k * index_size
        values = buffer[offset : offset + k * value_size].clone().view(layout.value_dtype).float()
        offset += k * value_size
        dense = torch.zeros(numel)
        dense.index_put_((idx,), values, accumulate=True)
        out.append(dense)
    return out


def fuse(buffers: list[torch.Tensor], layout: Layout) -> list[torch.Tensor]:
    """Mean over workers of what each sent (flat float32 tensors)."""
    decoded = [decode(b, layout) for b in buffers]
    return [torch.stack(parts).mean(0) for parts in zip(*decoded, strict=True)]
