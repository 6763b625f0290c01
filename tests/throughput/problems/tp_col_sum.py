"""Sum over dim 0 of a tall (rows, cols) matrix: a column reduction to a (cols,) vector."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=0)


# 72000 x 5000 fp32: 360M elements, 1.44 GB read once (the 20 KB output is negligible): ~0.3 ms at 4.8 TB/s
# on an H200, ~0.35-0.4 ms for eager's strided column reduction. Each column sums 72000 terms, well inside
# the default fp32 tolerance for any sensible summation order.
rows = 72000
cols = 5000

# rows and cols are not multiples of a block size, and rows spans several row tiles.
SMALL_SIZES = {"rows": 37, "cols": 123}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
