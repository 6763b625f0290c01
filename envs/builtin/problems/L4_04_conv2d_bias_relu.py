"""ReLU of a 3x3 2D convolution with bias, stride 1, no padding: relu(nn.Conv2d(in_channels, out_channels, 3)(x))."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=1, padding=0, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


# 2 * 16 * 192 * 120 * 120 * 128 * 9 ~ 1.0e11 FLOPs: ~2 ms at ~50 TFLOP/s fp32 (no TF32).
batch_size = 16
in_channels = 128
out_channels = 192
height = 122
width = 122

SMALL_SIZES = {"batch_size": 2, "in_channels": 6, "out_channels": 18, "height": 10, "width": 13}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
