"""2D convolution, 3x3 kernel, stride 1, padding 1, no bias: nn.Conv2d(in_channels, out_channels, 3, padding=1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 2 * 32 * 128 * 112 * 112 * 128 * 9 ~ 1.2e11 FLOPs: ~2.4 ms at ~50 TFLOP/s fp32 (no TF32).
batch_size = 32
in_channels = 128
out_channels = 128
height = 112
width = 112

SMALL_SIZES = {"batch_size": 2, "in_channels": 5, "out_channels": 20, "height": 9, "width": 11}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
