"""Raw Atari screens to a policy's input, as torch ops, so the served model can take what ALE gives.

A frugalrl Atari policy acts on a stack of ``stack_num`` grey ``img_size`` x ``img_size`` frames.
``ScreenPolicy`` wraps it so that its input is the raw RGB screens instead (``(n, stack_num, 210,
160, 3)`` uint8, the last ``stack_num`` screens the policy acted on, oldest first): grey by ALE's own
weights (``round(0.299 R + 0.587 G + 0.114 B)``, the exact values of ALE's grayscale observation),
then the antialiased bilinear resize of encoder pretraining (``resize_grey``).
The training env's native resize differs from it by about one grey level on average.

Frame skip with its max over the last two raw frames, no-ops after reset and FIRE are the client's:
they are state across calls, which a stateless served model cannot keep (docs/serving.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GREY_WEIGHTS = (0.299, 0.587, 0.114)  # ALE's RGB -> grey, checked against obs_type="grayscale" in the tests


def grey_levels(screens: torch.Tensor) -> torch.Tensor:
    """(..., 3) uint8 RGB -> (...) float grey levels 0-255, as ALE's grayscale observation has them."""
    return (screens.float() @ torch.tensor(GREY_WEIGHTS, dtype=torch.float32, device=screens.device)).round()


def resize_grey(grey: torch.Tensor, size: int) -> torch.Tensor:
    """(n, H, W) grey levels (any dtype) -> (n, size, size) uint8, antialiased bilinear."""
    small = F.interpolate(grey.float().unsqueeze(1), size=(size, size), mode="bilinear", antialias=True,
                          align_corners=False)  # fmt: skip
    return small.squeeze(1).round().clamp(0, 255).to(torch.uint8)


class ScreenPolicy(nn.Module):
    """``policy`` on raw RGB screens: ``forward(screens)`` -> deterministic actions."""

    def __init__(self, policy: nn.Module, img_size: int):
        super().__init__()
        self.policy = policy
        self.img_size = img_size

    def stack(self, screens: torch.Tensor) -> torch.Tensor:
        """(n, k, H, W, 3) uint8 RGB -> (n, k, img_size, img_size) uint8 grey: the policy's observation."""
        n, k, height, width, _ = screens.shape
        grey = grey_levels(screens).reshape(n * k, height, width)
        return resize_grey(grey, self.img_size).reshape(n, k, self.img_size, self.img_size)

    def forward(self, screens: torch.Tensor) -> torch.Tensor:
        return self.policy(self.stack(screens))
