"""Causal multi-head attention softmax(mask(Q K^T / sqrt(d))) V, written with explicit matmuls and softmax."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal attention on (batch, heads, seq, head_dim) tensors: query i attends to keys 0..i."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        return torch.matmul(attn, v)


# The (2, 16, 2048, 2048) score matrix is 0.54 GB; eager writes/reads it ~8 times (~4.3 GB:
# ~1.3 ms at 3.3 TB/s) plus 4*B*H*S^2*D = 3.4e10 fp32 matmul FLOPs (~0.8 ms): ~2.1 ms.
batch_size = 2
num_heads = 16
seq_len = 2048
head_dim = 64

SMALL_SIZES = {"batch_size": 2, "num_heads": 2, "seq_len": 100}


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
