"""Softmax over dim 0 (down each column) of a (rows, cols) matrix: a strided reduction across rows."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=0)


# rows*cols = 1.92e8 fp32 elements (768 MB): >= 1.54 GB moved (read + write): ~0.32 ms at 4.8 TB/s on an H200;
# eager reads the input for the max, the sum and the write (~3.1 GB): ~0.7 ms.
rows = 12000
cols = 16000

# rows spans several row chunks with a masked tail; cols is not a multiple of a column block.
SMALL_SIZES = {"rows": 75, "cols": 41}


def get_inputs():
    # Logits with std 3: with std 1 every probability in a 12000-long column is below ~3e-3, within a few atol
    # of zero; std 3 gives peaked columns (max ~0.1).
    return [3.0 * torch.randn(rows, cols)]


def get_init_inputs():
    return []
