# problem: tp_col_sum
# expect: correct
# why: a program per 32-column strip walks all rows in 64-row tiles, 8-tile groups summed first; deterministic
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _col_sum_strip(
    x_ptr, out_ptr, rows, cols, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, GROUP: tl.constexpr
):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < cols
    r_base = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for r0 in range(0, rows, BLOCK_R * GROUP):
        part = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
        for g in tl.static_range(GROUP):
            r = r0 + g * BLOCK_R + r_base
            mask = (r[:, None] < rows) & c_ok[None, :]
            part += tl.load(x_ptr + r[:, None].to(tl.int64) * stride_r + c[None, :], mask=mask, other=0.0)
        acc += part
    tl.store(out_ptr + c, tl.sum(acc, axis=0), mask=c_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(cols, device=x.device, dtype=x.dtype)
        block_c = 32
        _col_sum_strip[(triton.cdiv(cols, block_c),)](
            x, out, rows, cols, x.stride(0), BLOCK_R=64, BLOCK_C=block_c, GROUP=8, num_warps=4
        )
        return out
