"""Batched matrix multiplication C[b] = A[b] @ B[b] of fp32 tensors."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


# 2*batch*M*N*K = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32).
batch_size = 128
M = 512
K = 1024
N = 768

SMALL_SIZES = {"batch_size": 3, "M": 140, "K": 90, "N": 70}


def get_inputs():
    # B is scaled by 1/sqrt(K) so outputs are O(1): the fp32 accumulation-order
    # error over K terms then stays well inside the default 1e-4 tolerance.
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N) / K**0.5]


def get_init_inputs():
    return []
