"""A convolutional autoencoder: stacked 84x84 frames <-> a small latent vector.

The encoder is the Nature-DQN convolution stack followed by a linear map to ``latent_dim``
a layer norm and a tanh, so latents live in [-1, 1] (the world model and ``virtual_noise`` rely on a known
scale). The decoder mirrors it with transposed convolutions and reconstructs every frame of
the stack, so motion between frames has to pass through the latent.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from frugalrl.nets.torsos import nature_convs, orthogonal_init


class FrameEncoder(nn.Module):
    """(B, C, H, W) uint8 frames -> (B, latent_dim) in [-1, 1]."""

    def __init__(self, in_channels: int, frame_size: int, latent_dim: int, checkpointing: bool = False):
        super().__init__()
        self.in_channels, self.frame_size, self.latent_dim = in_channels, frame_size, latent_dim
        self.checkpointing = checkpointing
        self.convs = nature_convs(in_channels)
        with torch.no_grad():
            self.feature_shape = tuple(self.convs(torch.zeros(1, in_channels, frame_size, frame_size)).shape[1:])
        self.fc = orthogonal_init(nn.Linear(math.prod(self.feature_shape), latent_dim), gain=1.0)
        self.norm = nn.LayerNorm(latent_dim)  # keeps tanh out of saturation whatever the feature scale

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = frames.float() / 255.0
        if self.checkpointing and self.training and torch.is_grad_enabled():
            features = checkpoint(self.convs, x, use_reentrant=False)  # recompute activations in backward
        else:
            features = self.convs(x)
        return torch.tanh(self.norm(self.fc(features.flatten(1))))

    def spec(self) -> dict[str, Any]:
        return {"in_channels": self.in_channels, "frame_size": self.frame_size, "latent_dim": self.latent_dim}


class FrameDecoder(nn.Module):
    """(B, latent_dim) -> (B, C, H, W) pixel intensities in [0, 1]."""

    def __init__(self, encoder: FrameEncoder):
        super().__init__()
        c, h, w = encoder.feature_shape
        self.feature_shape = (c, h, w)
        self.fc = nn.Linear(encoder.latent_dim, c * h * w)
        self.deconvs = nn.Sequential(
            nn.ReLU(),
            nn.ConvTranspose2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 4, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(32, encoder.in_channels, 8, stride=4),
        )
        self.frame_size = encoder.frame_size

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        x = self.fc(latent).view(-1, *self.feature_shape)
        out = self.deconvs(x)
        size = self.frame_size
        if out.shape[-1] != size:  # frame sizes other than 84 do not invert exactly
            out = nn.functional.interpolate(out, size=(size, size), mode="bilinear", align_corners=False)
        return torch.sigmoid(out)


def psnr_db(reconstruction: torch.Tensor, frames: torch.Tensor) -> float:
    """Peak signal-to-noise ratio in dB of [0, 1] reconstructions against uint8 frames."""
    mse = ((reconstruction.float() - frames.float() / 255.0) ** 2).mean().item()
    return float("inf") if mse == 0 else 10.0 * math.log10(1.0 / mse)


def motion_mask(frames: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) uint8 stack -> (B, 1, H, W) in {0, 1}: pixels that change within the stack."""
    x = frames.float()
    if x.shape[1] < 2:
        return torch.zeros_like(x[:, :1])
    change = (x[:, 1:] - x[:, :-1]).abs().amax(dim=1, keepdim=True)
    return (change > 8.0).float()  # a few grey levels of resize noise are not motion


@torch.no_grad()
def encode(encoder: FrameEncoder, frames: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """``encoder`` over ``frames`` in batches of ``batch`` (bounds the activation memory)."""
    return torch.cat([encoder(frames[i : i + batch]) for i in range(0, len(frames), batch)]) if len(frames) else frames
