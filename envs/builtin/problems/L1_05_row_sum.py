"""Sum of each row of a 2-D tensor with long rows."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


# ~6.4 GB read (12288 x 131072 fp32), output negligible: ~1.6 ms at 4 TB/s.
rows = 12288
cols = 131072

SMALL_SIZES = {"rows": 7, "cols": 5000}


def get_inputs():
    # Scaled by 1/sqrt(cols) so row sums are O(1): fp32 accumulation-order error then
    # stays far below the default tolerance even for rows whose sum is near zero.
    return [torch.randn(rows, cols).div_(cols**0.5)]


def get_init_inputs():
    return []
