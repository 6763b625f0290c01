"""Softplus log(1 + exp(x)) with PyTorch's defaults (beta=1, linear above threshold=20)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x)


# ~6.4 GB moved (3.2 GB read + 3.2 GB written, one fused kernel): ~1.6 ms at 4 TB/s.
batch_size = 12288
dim = 65536

SMALL_SIZES = {"batch_size": 6, "dim": 1200}


def get_inputs():
    # Scaled so that a fraction of the values exceeds the threshold (20) and the
    # linear branch is exercised, even at the small size.
    return [torch.randn(batch_size, dim).mul_(8.0)]


def get_init_inputs():
    return []
