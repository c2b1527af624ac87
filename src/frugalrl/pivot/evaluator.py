"""The state-importance evaluator: a small network from a state to a score in [0, 1].

Trained to predict the rank (quantile) of a state's importance label within a rollout, so a
score of 0.8 means "more important than 80% of the states this policy sees". That makes the
scheduler's thresholds fractions of the batch, which is what the seed's rule (>= 0.8 full,
0.5-0.8 down-sampled, < 0.5 skipped) needs to mean something stable across tasks.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from frugalrl.checkpoint import atomic_write_bytes, load_artifact
from frugalrl.nets.torsos import orthogonal_init

EVALUATOR_FORMAT = "frugalrl-evaluator-1"


class ImportanceEvaluator(nn.Module):
    """MLP for vector observations, a small strided CNN for uint8 frames; sigmoid output."""

    # What pretraining it cost (FLOPs, recorded in evaluator.pt); None: trained in this run, or not recorded.
    pretrain_flops: float | None = None

    def __init__(self, obs_shape: tuple[int, ...], hidden: list[int], pixels: bool):
        super().__init__()
        self.obs_shape = tuple(obs_shape)
        self.hidden = list(hidden)
        self.pixels = pixels
        if pixels:
            channels, size = obs_shape[0], obs_shape[1]
            self.torso = nn.Sequential(
                nn.Conv2d(channels, 16, 8, stride=4), nn.ReLU(),
                nn.Conv2d(16, 32, 4, stride=2), nn.ReLU(),
                nn.Flatten(),
            )  # fmt: skip
            with torch.no_grad():
                in_dim = self.torso(torch.zeros(1, channels, size, size)).shape[1]
        else:
            self.torso = nn.Flatten()
            in_dim = int(np.prod(obs_shape))
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [orthogonal_init(nn.Linear(in_dim, size)), nn.ReLU()]
            in_dim = size
        layers.append(orthogonal_init(nn.Linear(in_dim, 1), gain=1.0))
        self.head = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, *obs_shape) -> importance scores (B,) in [0, 1]."""
        x = obs.float() / 255.0 if self.pixels else obs.float()
        return torch.sigmoid(self.head(self.torso(x))).squeeze(-1)

    def config(self) -> dict[str, Any]:
        return {"obs_shape": list(self.obs_shape), "hidden": self.hidden, "pixels": self.pixels}


def build_evaluator(obs_space: Any, hidden: list[int]) -> ImportanceEvaluator:
    pixels = obs_space.dtype == np.uint8 and len(obs_space.shape) == 3
    return ImportanceEvaluator(tuple(obs_space.shape), hidden, pixels)


def save_evaluator(path: Path, evaluator: ImportanceEvaluator, metadata: dict[str, Any] | None = None) -> None:
    """Write weights and shape (loadable with ``weights_only=True``), atomically."""
    buffer = io.BytesIO()
    blob = {"format": EVALUATOR_FORMAT, "config": evaluator.config(), "state_dict": evaluator.state_dict()}
    torch.save({**blob, "metadata": metadata or {}}, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_evaluator(path: Path) -> ImportanceEvaluator:
    """Load ``evaluator.pt`` (or a directory holding one)."""
    fix = "pretrain one with `frugalrl pretrain evaluator`"
    blob = load_artifact(path, "evaluator.pt", EVALUATOR_FORMAT, "importance evaluator", fix)
    cfg = blob["config"]
    evaluator = ImportanceEvaluator(tuple(cfg["obs_shape"]), cfg["hidden"], cfg["pixels"])
    evaluator.load_state_dict(blob["state_dict"])
    evaluator.pretrain_flops = blob.get("metadata", {}).get("pretrain_flops")
    return evaluator


def adapt_to(evaluator: ImportanceEvaluator, obs_space: Any) -> tuple[ImportanceEvaluator, str]:
    """Reuse a pretrained evaluator on a task whose observations may differ.

    Same shape: everything transfers. Different vector size: the hidden layers transfer and the
    input layer is re-initialised (it cannot map a different number of features). Pixels to
    vectors or back: nothing can transfer; a fresh evaluator is returned. The string says which.
    """
    target = build_evaluator(obs_space, evaluator.hidden)
    target.pretrain_flops = evaluator.pretrain_flops  # paid whatever transfers
    if tuple(obs_space.shape) == evaluator.obs_shape and target.pixels == evaluator.pixels:
        return evaluator, "all layers transferred"
    if target.pixels or evaluator.pixels:
        return target, "nothing transferred (pixel and vector observations differ)"
    source = evaluator.state_dict()
    own = target.state_dict()
    first = next(name for name in own if name.endswith("weight") and name.startswith("head."))
    first_bias = first.replace("weight", "bias")
    kept = {k: v for k, v in source.items() if k not in (first, first_bias) and k in own and own[k].shape == v.shape}
    own.update(kept)
    target.load_state_dict(own)
    return target, f"hidden layers transferred, input layer re-initialised ({evaluator.obs_shape} -> {obs_space.shape})"
