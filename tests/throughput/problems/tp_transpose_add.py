"""Add a square matrix to the transpose of another: x + y.t() (memory bound, one transposed read)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y.t()


# n*n = 1.69e8 fp32 elements per matrix: two reads + one write = 2.03 GB moved: ~0.42 ms at 4.8 TB/s on an
# H200, ~0.6 ms for eager (the column-strided read of y is poorly coalesced). Inputs: 2 * 676 MB = 1.35 GB.
n = 13000

# 45 is not a multiple of any power-of-two tile: both tile axes have a ragged edge.
SMALL_SIZES = {"n": 45}


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
