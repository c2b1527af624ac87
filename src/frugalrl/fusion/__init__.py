"""Multi-worker training: top-k gradient fusion with error feedback over torch.distributed."""

from frugalrl.fusion.sync import GradientFusion
from frugalrl.fusion.topk import Layout, decode, encode, fuse

__all__ = ["GradientFusion", "Layout", "decode", "encode", "fuse"]
