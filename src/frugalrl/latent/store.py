"""``encoder.pt``: the frame encoder, its decoder and the latent world model, saved together.

One file, loadable with ``torch.load(weights_only=True)``, written atomically; a run directory,
a path or an MLflow URI (``models:/breakout-encoder@champion``) all resolve to it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from frugalrl.checkpoint import atomic_write_bytes, load_artifact
from frugalrl.latent.encoder import FrameDecoder, FrameEncoder
from frugalrl.latent.world_model import LatentWorldModel
from frugalrl.tracking.artifacts import resolve_artifact

ENCODER_FORMAT = "frugalrl-encoder-v1"


@dataclass
class LatentModels:
    encoder: FrameEncoder
    decoder: FrameDecoder
    world_model: LatentWorldModel
    metadata: dict[str, Any] = field(default_factory=dict)


def save_latent(path: Path, models: LatentModels) -> None:
    buffer = io.BytesIO()
    torch.save(
        {
            "format": ENCODER_FORMAT,
            "encoder_spec": models.encoder.spec(),
            "world_model_spec": models.world_model.spec(),
            "encoder": models.encoder.state_dict(),
            "decoder": models.decoder.state_dict(),
            "world_model": models.world_model.state_dict(),
            "metadata": models.metadata,
        },
        buffer,
    )
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_latent_file(path: Path) -> LatentModels:
    fix = "pretrain one with `frugalrl pretrain encoder`"
    blob = load_artifact(path, "encoder.pt", ENCODER_FORMAT, "encoder file", fix)
    spec = blob["encoder_spec"]
    encoder = FrameEncoder(spec["in_channels"], spec["frame_size"], spec["latent_dim"])
    encoder.load_state_dict(blob["encoder"])
    decoder = FrameDecoder(encoder)
    decoder.load_state_dict(blob["decoder"])
    wm_spec = blob["world_model_spec"]
    world_model = LatentWorldModel(wm_spec["latent_dim"], wm_spec["num_actions"], wm_spec["hidden"])
    world_model.load_state_dict(blob["world_model"])
    return LatentModels(encoder, decoder, world_model, dict(blob.get("metadata", {})))


def load_latent(uri: str | Path) -> LatentModels:
    """From a path, a run directory, or an MLflow ``models:/`` / ``runs:/`` URI."""
    fix = "register one with `frugalrl pretrain encoder`"
    return load_latent_file(resolve_artifact(uri, "encoder.pt", "encoder", fix))
