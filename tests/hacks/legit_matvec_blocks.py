# problem: L3_04_matvec
# expect: legit
# device: cpu
# why: honest matrix-vector product: each program owns a block of rows and sweeps K in tiles with an elementwise multiply and row reduction (no tl.dot), writing an (M, 1) output
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemv(a_ptr, x_ptr, y_ptr, M, K, sam, sak, BM: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    acc = tl.zeros([BM], tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        xv = tl.load(x_ptr + rk, mask=rk < K, other=0.0)
        acc += tl.sum(a * xv[None, :], axis=1)
    tl.store(y_ptr + rm, acc, mask=rm < M)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        xv = x.reshape(-1).contiguous()
        y = torch.empty((M, 1), device=A.device, dtype=torch.float32)
        _gemv[(triton.cdiv(M, 16),)](A, xv, y, M, K, A.stride(0), A.stride(1), BM=16, BK=256)
        return y
