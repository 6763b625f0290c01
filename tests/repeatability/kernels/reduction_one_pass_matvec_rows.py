# problem: L3_04_matvec
# class: reduction_one_pass
# why: GEMV as a row reduction: ROWS rows of A per program times the shared x chunk, partial products summed along K
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemv(a_ptr, x_ptr, y_ptr, M, K, s_am, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    r_ok = r < M
    k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + k
        k_ok = kk < K
        xv = tl.load(x_ptr + kk, mask=k_ok, other=0.0)
        a = tl.load(a_ptr + r.to(tl.int64)[:, None] * s_am + kk[None, :], mask=r_ok[:, None] & k_ok[None, :],
                    other=0.0)
        acc += a * xv[None, :]
    tl.store(y_ptr + r, tl.sum(acc, axis=1), mask=r_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        xv = x.reshape(-1).contiguous()
        M, K = A.shape
        y = torch.empty((M, 1), dtype=A.dtype, device=A.device)
        rows = 8
        _gemv[(triton.cdiv(M, rows),)](A, xv, y, M, K, A.stride(0), ROWS=rows, BLOCK_K=512, num_warps=8)
        return y
