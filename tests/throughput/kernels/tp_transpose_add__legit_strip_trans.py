# problem: tp_transpose_add
# expect: correct
# why: one program per 16-row strip looping 128-col steps; y tile loaded row-major and flipped with tl.trans
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _strip_add_trans(x_ptr, y_ptr, o_ptr, n, BM: tl.constexpr, BN: tl.constexpr):
    ri = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    i_ok = ri < n
    for j0 in range(0, n, BN):
        rj = j0 + tl.arange(0, BN).to(tl.int64)
        j_ok = rj < n
        a = tl.load(x_ptr + ri[:, None] * n + rj[None, :], mask=i_ok[:, None] & j_ok[None, :], other=0.0)
        # y rows rj, columns ri: contiguous along ri in memory
        yt = tl.load(y_ptr + rj[:, None] * n + ri[None, :], mask=j_ok[:, None] & i_ok[None, :], other=0.0)
        tl.store(o_ptr + ri[:, None] * n + rj[None, :], a + tl.trans(yt), mask=i_ok[:, None] & j_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        n = x.shape[0]
        out = torch.empty((n, n), device=x.device, dtype=torch.float32)
        _strip_add_trans[(triton.cdiv(n, 16),)](x, y, out, n, BM=16, BN=128, num_warps=4)
        return out
