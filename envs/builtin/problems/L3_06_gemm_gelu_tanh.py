"""Fully connected layer followed by tanh-approximated GELU: gelu(x @ W.T + b, approximate="tanh")."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


# 2*batch*in*out = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32).
batch_size = 4096
in_features = 3072
out_features = 4096

SMALL_SIZES = {"batch_size": 140, "in_features": 90, "out_features": 150}


def get_inputs():
    # nn.Linear's default init (std ~ 1/sqrt(3*in)) already keeps outputs O(1).
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
