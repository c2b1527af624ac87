"""The latent curriculum's pretraining stage: game frames, then the frame encoder and latent world model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.pretraining import PretrainStage, register

if TYPE_CHECKING:
    from frugalrl.config import ExperimentConfig


def _needed(config: ExperimentConfig) -> bool:
    return config.latent_curriculum


LATENT = register(
    PretrainStage(
        name="latent",
        produces="encoder + world model",
        description="Latent curriculum on a pretrained encoder.",
        override="latent.encoder_from",
        needed=_needed,
        collect="frugalrl.latent.dataset:collect_frames_to",
        pretrain="frugalrl.latent.pretrain:pretrain_from_frames",
        # pretrain_flops, not train_flops: a pretraining run books its whole cost as pretraining (train_flops is 0)
        metrics=("psnr_db", "ball_r2_mlp", "paddle_r2_mlp", "ball_ceiling_r2", "latent_error_1", "pretrain_flops"),
        collect_name="collect game frames",
        pretrain_name="pretrain encoder + world model",
        train_name="curriculum training (virtual + real)",
    )
)
