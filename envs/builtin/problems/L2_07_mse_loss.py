"""Mean squared error between two tensors (scalar mean reduction)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(pred, target)


# Two inputs of 2^29 fp32 elements: 4.3 GB read (~1.2 ms at 3.5 TB/s); eager also writes and
# re-reads the elementwise loss: ~8.6 GB, ~2.5 ms.
batch_size = 8192
dim = 65536

# 5 * 3000 = 15000 elements: several 4096-wide blocks, not a multiple of the block.
SMALL_SIZES = {"batch_size": 5, "dim": 3000}


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
