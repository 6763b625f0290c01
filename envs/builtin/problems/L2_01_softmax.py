"""Softmax over the last dimension of a (rows, cols) matrix with long rows."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


# 2^29 fp32 elements: >= 4.3 GB moved (read + write): ~1.2 ms at 3.5 TB/s, more with a second read.
rows = 4096
cols = 131072

# cols spans several 2048-wide blocks and is not a multiple of the block.
SMALL_SIZES = {"rows": 7, "cols": 5000}


def get_inputs():
    # Logits with std 3: with std 1 every probability in a 131072-wide row is below ~1e-3,
    # i.e. within a few atol of zero; std 3 gives peaked rows (max ~0.1).
    return [3.0 * torch.randn(rows, cols)]


def get_init_inputs():
    return []
