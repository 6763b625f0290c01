"""Unbiased variance over the last dimension of a (rows, cols) matrix, written as the explicit two-pass formula."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        centered = x - x.mean(dim=-1, keepdim=True)
        return (centered * centered).sum(dim=-1) / (n - 1)


# 16384 x 8192 fp32 = 2^27 elements (512 MiB). Eager runs mean (read 1), sub (read 1, write 1), mul (read 2,
# write 1) and sum (read 1): ~7 tensor-sized passes, ~3.8 GB moved, ~0.8 ms at ~4.5 TB/s on an H200 (a fused
# kernel reads 0.5 GB once: ~0.12 ms).
rows = 16384
cols = 8192

# cols is not a power of two and spans more than one 1024-wide block.
SMALL_SIZES = {"rows": 6, "cols": 1234}


def get_inputs():
    # an offset mean makes a one-pass E[x^2] - E[x]^2 shortcut lose precision.
    return [torch.randn(rows, cols) + 3.0]


def get_init_inputs():
    return []
