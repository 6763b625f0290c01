"""Dense C = A @ B of small fp32 matrices: launch-bound (L3_01's op at 1/768 of its FLOPs)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


# 2*M*N*K = 3.4e7 FLOPs: under 1 us at ~50 TFLOP/s (fp32): well under 0.1 ms on an H200.
M = 256
K = 256
N = 256

SMALL_SIZES = {"M": 70, "K": 50, "N": 90}


def get_inputs():
    # B is scaled by 1/sqrt(K) so outputs are O(1), as in L3_01
    return [torch.randn(M, K), torch.randn(K, N) / K**0.5]


def get_init_inputs():
    return []
