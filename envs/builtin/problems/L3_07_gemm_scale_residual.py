"""Fully connected layer, scaled, plus a residual: (x @ W.T + b) * scale + x."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + x


# 2*batch*features^2 = 1.05e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32).
batch_size = 4096
features = 3584
scale = 1.5

SMALL_SIZES = {"batch_size": 150, "features": 120}


def get_inputs():
    # nn.Linear's default init (std ~ 1/sqrt(3*in)) already keeps outputs O(1).
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale]
