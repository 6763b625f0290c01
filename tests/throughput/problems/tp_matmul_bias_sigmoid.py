"""Dense layer with a sigmoid gate: sigmoid(x @ W + bias), W stored (in_dim, out_dim)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        # randn scaled by 1/sqrt(in_dim) keeps x @ W ~ N(0, 1), so the sigmoid is not saturated;
        # a randn bias (not zeros) makes a kernel that drops it fail.
        self.weight = nn.Parameter(torch.randn(in_dim, out_dim) / in_dim**0.5)
        self.bias = nn.Parameter(torch.randn(out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x @ self.weight + self.bias)


# 2*batch*in_dim*out_dim = 2*3072*4096*3584 = 9.0e10 FLOPs: ~1.8 ms at ~50 TFLOP/s (fp32, no TF32) on an H200;
# the bias add and sigmoid move 2 * 44 MB more (~0.02 ms). Inputs: x 50 MB + W 59 MB.
batch = 3072
in_dim = 4096
out_dim = 3584

# none is a multiple of 16: every tile edge is ragged and the K loop has a masked tail.
SMALL_SIZES = {"batch": 45, "in_dim": 67, "out_dim": 83}


def get_inputs():
    return [torch.randn(batch, in_dim)]


def get_init_inputs():
    return [in_dim, out_dim]
