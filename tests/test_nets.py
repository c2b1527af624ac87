"""Network building blocks: the fractal residual block and where it goes."""

from __future__ import annotations

import pytest
import torch

from frugalrl.config import validate_config
from frugalrl.errors import ConfigError
from frugalrl.nets.torsos import MLP, FractalBlock, NatureCNN


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
