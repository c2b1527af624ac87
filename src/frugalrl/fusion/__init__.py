"""Multi-worker training: top-k gradient fusion with error feedback over torch.distributed."""

from frugalrl.fusion.reducers import make_reducer
from frugalrl.fusion.sync import DenseAllReduce, GradientFusion, TopKFusion
from frugalrl.fusion.topk import Layout, decode, encode, fuse

__all__ = ["DenseAllReduce", "GradientFusion", "Layout", "TopKFusion", "decode", "encode", "fuse", "make_reducer"]
