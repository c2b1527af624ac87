"""The built-in gradient reducers: ``topk`` (the seed's top-k fusion, settings: its ``share``) and ``dense``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from frugalrl.fusion.reducers import REDUCERS, ReducerContext
from frugalrl.fusion.sync import DenseAllReduce, GradientFusion, TopKFusion


class TopKSettings(BaseModel):
    """``distributed.settings`` of ``kind: topk``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    share: float = Field(0.2, gt=0.0, le=1.0, description="share of each gradient tensor sent per step")


@REDUCERS.register("topk", settings=TopKSettings)
def topk(context: ReducerContext) -> GradientFusion:
    return TopKFusion(context.config, context.world_size, context.settings.share)


@REDUCERS.register("dense")
def dense(context: ReducerContext) -> GradientFusion:
    return DenseAllReduce(context.config, context.world_size)
