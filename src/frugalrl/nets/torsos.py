"""Feature extractors: an MLP for vectors and the Nature-DQN CNN for stacked frames; fractal and residual blocks."""

from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def orthogonal_init(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights, zero bias: the PPO default (Engstrom et al. 2020)."""
    if isinstance(layer, nn.Linear | nn.Conv2d):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def default_init(network: nn.Module) -> nn.Module:
    """PyTorch's own initialisation for every layer (``policy.ortho_init: false``; SB3's DQN/SAC use it)."""
    for module in network.modules():
        if isinstance(module, nn.Linear | nn.Conv2d):
            module.reset_parameters()
    return network


class FractalBlock(nn.Module):
    """The RMT seed's fractal residual block: ``x + x1 + x2`` with x1 = f(W1 x), x2 = f(W2 x1).

    Width-preserving, on vectors (Linear) or feature maps (3x3 Conv2d, padding 1).
    """

    def __init__(self, width: int, activation: str = "relu", conv: bool = False):
        super().__init__()

        def layer() -> nn.Module:
            return nn.Conv2d(width, width, 3, padding=1) if conv else nn.Linear(width, width)

        self.layer1 = orthogonal_init(layer())
        self.layer2 = orthogonal_init(layer())
        self.act = ACTIVATIONS[activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.act(self.layer1(x))
        x2 = self.act(self.layer2(x1))
        return x + x1 + x2


class ResidualBlock(FractalBlock):
    """The standard residual block on the same two layers: ``x + x2`` (He et al. 2016, without the norm).

    The control for the fractal block's claim: identical layers and initialisation, only the extra
    ``x1`` path differs, so a difference between the two is that path's.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.layer2(self.act(self.layer1(x))))


BLOCKS: dict[str, type[FractalBlock]] = {"fractal": FractalBlock, "residual": ResidualBlock}


class MLP(nn.Module):
    """Flatten, then Linear + activation for each hidden size. ``out_dim`` = last hidden size.

    ``block="fractal"`` (or ``"residual"``): every hidden layer after the first is a ``FractalBlock``
    (``ResidualBlock``) of that width.
    """

    def __init__(self, in_dim: int, hidden: list[int], activation: str = "tanh", block: str = "plain"):
        super().__init__()
        layers: list[nn.Module] = []
        for i, size in enumerate(hidden):
            if block in BLOCKS and i > 0:
                if size != in_dim:
                    raise ValueError(f"{block} blocks keep their width: hidden {hidden} must repeat one size")
                layers.append(BLOCKS[block](size, activation))
                continue
            layers += [orthogonal_init(nn.Linear(in_dim, size)), ACTIVATIONS[activation]()]
            in_dim = size
        self.body = nn.Sequential(*layers)
        self.out_dim = in_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs.flatten(1))  # (B, *obs_shape) -> (B, out_dim)


def nature_convs(in_channels: int) -> nn.Sequential:
    """The Nature-DQN convolutions: (B, C, 84, 84) -> (B, 64, 7, 7)."""
    return nn.Sequential(
        orthogonal_init(nn.Conv2d(in_channels, 32, 8, stride=4)),
        nn.ReLU(),
        orthogonal_init(nn.Conv2d(32, 64, 4, stride=2)),
        nn.ReLU(),
        orthogonal_init(nn.Conv2d(64, 64, 3, stride=1)),
        nn.ReLU(),
    )


class NatureCNN(nn.Module):
    """Mnih et al. 2015: three convolutions and a 512-unit layer; uint8 frames in [0, 255]."""

    def __init__(self, in_channels: int, frame_size: int = 84, out_dim: int = 512, block: str = "plain"):
        super().__init__()
        extra = [BLOCKS[block](64, "relu", conv=True)] if block in BLOCKS else []
        # block = fractal (residual): one such block on the last feature map
        self.convs = nn.Sequential(*nature_convs(in_channels), *extra, nn.Flatten())
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, in_channels, frame_size, frame_size)).shape[1]
        self.fc = nn.Sequential(orthogonal_init(nn.Linear(flat, out_dim)), nn.ReLU())
        self.out_dim = out_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # (B, C, H, W) uint8 -> (B, 512)
        return self.fc(self.convs(obs.float() / 255.0))
