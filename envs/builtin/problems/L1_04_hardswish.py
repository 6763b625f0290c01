"""Hardswish x * relu6(x + 3) / 6, applied elementwise."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardswish(x)


# ~6.4 GB moved (3.2 GB read + 3.2 GB written, one fused kernel): ~1.6 ms at 4 TB/s.
batch_size = 32768
dim = 24576

SMALL_SIZES = {"batch_size": 9, "dim": 777}


def get_inputs():
    # Scaled so that both the zero region (x <= -3) and the identity region (x >= 3) are hit often.
    return [torch.randn(batch_size, dim).mul_(3.0)]


def get_init_inputs():
    return []
