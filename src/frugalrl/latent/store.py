"""``encoder.pt``: the frame encoder, its decoder and the latent world model(s), saved together.

An encoder pretrained on several games (``frugalrl pretrain encoder --games ...``) carries one
world-model head per game (each game has its own actions and dynamics); ``heads`` maps the game
id to its head and ``world_model`` is the head in use (``for_game``).

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
    heads: dict[str, LatentWorldModel] = field(default_factory=dict)

    @property
    def games(self) -> list[str]:
        """The games the encoder was trained on (one for a single-game encoder)."""
        return list(self.metadata.get("games") or ([self.metadata["env_id"]] if "env_id" in self.metadata else []))

    def for_game(self, game: str) -> LatentModels:
        """Use ``game``'s world-model head (KeyError when the encoder never saw the game)."""
        if self.heads:
            self.world_model = self.heads[game]
        elif game not in self.games:
            raise KeyError(game)
        return self


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
            "heads": {game: {"spec": wm.spec(), "state": wm.state_dict()} for game, wm in models.heads.items()},
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
    heads = {}
    for game, head in blob.get("heads", {}).items():  # absent in single-game files
        heads[game] = LatentWorldModel(head["spec"]["latent_dim"], head["spec"]["num_actions"], head["spec"]["hidden"])
        heads[game].load_state_dict(head["state"])
    return LatentModels(encoder, decoder, world_model, dict(blob.get("metadata", {})), heads)


def load_latent(uri: str | Path) -> LatentModels:
    """From a path, a run directory, or an MLflow ``models:/`` / ``runs:/`` URI."""
    fix = "register one with `frugalrl pretrain encoder`"
    return load_latent_file(resolve_artifact(uri, "encoder.pt", "encoder", fix))
