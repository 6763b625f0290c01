# problem: tp_silu_mul
# expect: correct
# why: 2-D grid of 8 x 256 tiles through each input's own strides (no copies); silu as a / (1 + exp(-a))
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_mul_tile(
    a_ptr,
    b_ptr,
    out_ptr,
    rows,
    cols,
    sa0,
    sa1,
    sb0,
    sb1,
    so0,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    r = tl.program_id(1).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    a = tl.load(a_ptr + r[:, None] * sa0 + c[None, :] * sa1, mask=mask, other=0.0)
    b = tl.load(b_ptr + r[:, None] * sb0 + c[None, :] * sb1, mask=mask, other=0.0)
    gate = a / (1.0 + tl.exp(-a))
    tl.store(out_ptr + r[:, None] * so0 + c[None, :], gate * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        rows, cols = a.shape
        out = torch.empty((rows, cols), device=a.device, dtype=a.dtype)
        block_r, block_c = 8, 256
        grid = (triton.cdiv(cols, block_c), triton.cdiv(rows, block_r))
        _silu_mul_tile[grid](
            a,
            b,
            out,
            rows,
            cols,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            out.stride(0),
            BLOCK_R=block_r,
            BLOCK_C=block_c,
            num_warps=4,
        )
        return out
