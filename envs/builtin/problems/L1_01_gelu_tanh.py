"""GELU with the tanh approximation, applied elementwise."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


# ~6.4 GB moved (3.2 GB read + 3.2 GB written, one fused kernel): ~1.6 ms at 4 TB/s.
batch_size = 24576
dim = 32768

SMALL_SIZES = {"batch_size": 7, "dim": 1001}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
