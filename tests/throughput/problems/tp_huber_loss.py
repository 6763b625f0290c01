"""Mean smooth-L1 (Huber, delta=1) loss over all elements of two (rows, cols) matrices, written with torch.where."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        diff = pred - target
        absd = torch.abs(diff)
        loss = torch.where(absd < 1.0, 0.5 * diff * diff, absd - 0.5)
        return loss.mean()


# 8192 x 8192 fp32 per input = 2^26 elements (256 MiB each, 512 MiB in all). Eager runs ~8 kernels (sub, abs,
# mul, mul, lt, sub, where, mean): ~16 tensor-sized passes, ~4 GB moved, ~0.9 ms at ~4.5 TB/s on an H200
# (a fused reduction reads 0.5 GB once: ~0.12 ms). randn inputs put ~48% of |diff| below 1, so both
# branches matter.
rows = 8192
cols = 8192

# rows * cols = 2331, not a multiple of any block.
SMALL_SIZES = {"rows": 3, "cols": 777}


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
