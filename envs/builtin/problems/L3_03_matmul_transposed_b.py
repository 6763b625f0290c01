"""Matrix multiplication with a transposed right operand: C = A @ B.T, B given as (N, K)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B.T


# 2*M*N*K = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32).
M = 4096
K = 4096
N = 3072

SMALL_SIZES = {"M": 130, "K": 110, "N": 150}


def get_inputs():
    # B is scaled by 1/sqrt(K) so outputs are O(1): the fp32 accumulation-order
    # error over K terms then stays well inside the default 1e-4 tolerance.
    return [torch.randn(M, K), torch.randn(N, K) / K**0.5]


def get_init_inputs():
    return []
