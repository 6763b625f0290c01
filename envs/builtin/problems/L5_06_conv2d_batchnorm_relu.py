"""Inference-mode conv block: relu(BatchNorm2d(Conv2d(x))) with a 'same'-padded odd kernel and running BN statistics."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        # Non-trivial BN statistics and affine parameters (the defaults would make BN ~identity).
        with torch.no_grad():
            self.bn.weight.copy_(torch.randn(out_channels))
            self.bn.bias.copy_(torch.randn(out_channels))
            self.bn.running_mean.copy_(0.2 * torch.randn(out_channels))
            self.bn.running_var.copy_(0.5 + torch.rand(out_channels))
        self.eval()  # BN uses the running statistics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


# 2 * 48 * 128 * 128*128 * 64*9 = 1.16e11 conv FLOPs: ~2.3 ms at ~50 TFLOP/s fp32 (no TF32),
# plus ~2.2 GB for the conv/BN/ReLU passes over the 0.4 GB output (~0.7 ms at 3.3 TB/s).
batch_size = 48
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3

SMALL_SIZES = {"batch_size": 2, "in_channels": 5, "out_channels": 20, "height": 13, "width": 11}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
