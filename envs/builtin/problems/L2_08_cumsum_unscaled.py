"""Inclusive prefix sum along dim 1 of unscaled Gaussian rows.

Unlike L2_05 the inputs are not scaled down: running sums reach a few hundred, so every correct fp32
summation order, PyTorch's own included, is ~1e-4 off the exact sum near zero crossings, beyond
atol + rtol * |ref|. Correct kernels pass by the float64-truth rule (envs/truth.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


# 2^29 fp32 elements: 4.3 GB moved (read + write): ~1.2 ms at 3.5 TB/s.
rows = 16384
cols = 32768

# cols spans six 1024-wide blocks, the last one partial.
SMALL_SIZES = {"rows": 4, "cols": 6000}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
