"""1D convolution (stride 1, no padding) with bias: nn.Conv1d(in_channels, out_channels, kernel_size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 2 * 16 * 256 * 16378 * 128 * 7 ~ 1.2e11 FLOPs: ~2.4 ms at ~50 TFLOP/s fp32 (no TF32).
batch_size = 16
in_channels = 128
out_channels = 256
kernel_size = 7
length = 16384

SMALL_SIZES = {"batch_size": 2, "in_channels": 5, "out_channels": 19, "kernel_size": 5, "length": 50}


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
