"""Exact (erf) GELU of x plus a per-column bias broadcast over the rows, written with plain torch ops."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        y = x + bias
        return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))


# 8192 x 8192 fp32 = 2^26 elements (256 MiB per tensor). Eager runs 6 elementwise kernels (add, div, erf,
# add, mul, mul): ~13 tensor-sized reads + writes, ~3.5 GB moved, ~0.8 ms at ~4.5 TB/s on an H200
# (a fused kernel moves 0.5 GB: ~0.12 ms).
rows = 8192
cols = 8192

# cols is not a power of two, so column blocks have a ragged edge.
SMALL_SIZES = {"rows": 7, "cols": 333}


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(cols)]


def get_init_inputs():
    return []
