"""Fully connected layer followed by ReLU: relu(x @ W.T + b)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


# 2*batch*in*out = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32).
batch_size = 4096
in_features = 4096
out_features = 3072

SMALL_SIZES = {"batch_size": 150, "in_features": 100, "out_features": 130}


def get_inputs():
    # nn.Linear's default init (std ~ 1/sqrt(3*in)) already keeps outputs O(1).
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
