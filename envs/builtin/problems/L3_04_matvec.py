"""Matrix-vector product y = A @ x with A of shape (M, K) and x of shape (K, 1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


# Memory-bound: reading A is M*K*4 = 6.4 GB: ~1.6 ms at 4 TB/s.
M = 49152
K = 32768

SMALL_SIZES = {"M": 37, "K": 1500}


def get_inputs():
    # x is scaled by 1/sqrt(K) so outputs are O(1): the fp32 accumulation-order
    # error over K terms then stays well inside the default 1e-4 tolerance.
    return [torch.randn(M, K), torch.randn(K, 1) / K**0.5]


def get_init_inputs():
    return []
