"""Network building blocks: the fractal residual block, its residual control, and where they go."""

from __future__ import annotations

import pytest
import torch

from frugalrl.config import validate_config
from frugalrl.errors import ConfigError
from frugalrl.nets.torsos import MLP, FractalBlock, NatureCNN, ResidualBlock


def test_fractal_block_is_x_plus_both_branches():
    block = FractalBlock(8)
    x = torch.randn(5, 8)
    x1 = torch.relu(block.layer1(x))
    x2 = torch.relu(block.layer2(x1))
    torch.testing.assert_close(block(x), x + x1 + x2)
    conv = FractalBlock(4, conv=True)
    assert conv(torch.randn(2, 4, 7, 7)).shape == (2, 4, 7, 7)


def test_fractal_torsos_keep_their_output_sizes():
    mlp = MLP(4, [32, 32, 32], "relu", "fractal")
    assert sum(isinstance(m, FractalBlock) for m in mlp.modules()) == 2
    assert mlp(torch.zeros(3, 4)).shape == (3, 32)
    cnn = NatureCNN(4, 84, block="fractal")
    assert cnn(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 512)
    with pytest.raises(ConfigError, match="one width"):
        validate_config({"policy": {"block": "fractal", "hidden": [64, 32]}})


def test_residual_block_is_x_plus_the_second_branch_on_the_same_layers():
    torch.manual_seed(0)
    fractal = FractalBlock(8)
    torch.manual_seed(0)
    residual = ResidualBlock(8)
    for a, b in zip(fractal.parameters(), residual.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # same layers, same initialisation: only the x1 path differs
    x = torch.randn(5, 8)
    x1 = torch.relu(residual.layer1(x))
    x2 = torch.relu(residual.layer2(x1))
    torch.testing.assert_close(residual(x), x + x2)
    torch.testing.assert_close(fractal(x) - residual(x), x1)


def test_residual_torsos_go_where_fractal_ones_do():
    mlp = MLP(4, [32, 32, 32], "relu", "residual")
    blocks = [m for m in mlp.modules() if isinstance(m, FractalBlock)]
    assert len(blocks) == 2 and all(type(m) is ResidualBlock for m in blocks)
    assert mlp(torch.zeros(3, 4)).shape == (3, 32)
    cnn = NatureCNN(4, 84, block="residual")
    assert any(isinstance(m, ResidualBlock) for m in cnn.modules())
    assert cnn(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 512)
    with pytest.raises(ConfigError, match="residual keeps one width"):
        validate_config({"policy": {"block": "residual", "hidden": [64, 32]}})
