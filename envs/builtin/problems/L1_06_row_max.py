"""Maximum of each row of a 2-D tensor."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(dim=-1)


# ~6.4 GB read (32768 x 49152 fp32), output negligible: ~1.6 ms at 4 TB/s.
rows = 32768
cols = 49152

SMALL_SIZES = {"rows": 9, "cols": 4500}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
