# problem: tp_col_sum
# expect: incorrect
# why: column sum as a ones-matrix tl.dot with fp16 operands: every element rounded to fp16 first
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _col_sum_dot16(x_ptr, out_ptr, rows, cols, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < cols
    r_base = tl.arange(0, BLOCK_R)
    ones = tl.full([16, BLOCK_R], 1.0, tl.float16)
    acc = tl.zeros([16, BLOCK_C], tl.float32)
    for r0 in range(0, rows, BLOCK_R):
        r = r0 + r_base
        mask = (r[:, None] < rows) & c_ok[None, :]
        tile = tl.load(x_ptr + r[:, None].to(tl.int64) * stride_r + c[None, :], mask=mask, other=0.0)
        acc = tl.dot(ones, tile.to(tl.float16), acc)
    # the 16 rows of acc are identical copies of the column sums
    tl.store(out_ptr + c, tl.sum(acc, axis=0) * 0.0625, mask=c_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(cols, device=x.device, dtype=x.dtype)
        block_c = 64
        _col_sum_dot16[(triton.cdiv(cols, block_c),)](
            x, out, rows, cols, x.stride(0), BLOCK_R=64, BLOCK_C=block_c, num_warps=4
        )
        return out
