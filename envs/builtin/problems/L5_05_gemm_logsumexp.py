"""Fully connected layer reduced by logsumexp over features: logsumexp(x @ W.T + b, dim=1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(self.linear(x), dim=1)


# 2*batch*in*out = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32); logits are 0.1 GB.
batch_size = 8192
in_features = 2048
out_features = 3072

SMALL_SIZES = {"batch_size": 100, "in_features": 200, "out_features": 300}


def get_inputs():
    # Scaled so the logits have std ~2: with unit inputs every row's logsumexp is ~log(out_features)
    # and the output barely depends on x.
    return [3.0 * torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
