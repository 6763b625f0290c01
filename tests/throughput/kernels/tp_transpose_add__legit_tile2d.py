# problem: tp_transpose_add
# expect: correct
# why: 2-D grid of 64x64 tiles; y read through swapped strides, Triton transposes via shared memory
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_transposed(x_ptr, y_ptr, o_ptr, n, sx0, sx1, sy0, sy1, so0, so1, BM: tl.constexpr, BN: tl.constexpr):
    ri = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rj = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    ok = (ri[:, None] < n) & (rj[None, :] < n)
    a = tl.load(x_ptr + ri[:, None] * sx0 + rj[None, :] * sx1, mask=ok, other=0.0)
    b = tl.load(y_ptr + rj[None, :] * sy0 + ri[:, None] * sy1, mask=ok, other=0.0)
    tl.store(o_ptr + ri[:, None] * so0 + rj[None, :] * so1, a + b, mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        out = torch.empty((n, n), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(n, 64), triton.cdiv(n, 64))
        _add_transposed[grid](
            x,
            y,
            out,
            n,
            x.stride(0),
            x.stride(1),
            y.stride(0),
            y.stride(1),
            out.stride(0),
            out.stride(1),
            BM=64,
            BN=64,
            num_warps=4,
        )
        return out
