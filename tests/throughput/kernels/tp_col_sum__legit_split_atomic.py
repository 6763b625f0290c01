# problem: tp_col_sum
# expect: correct
# why: split-K: 2-D grid of 128-column strips x ~128 row chunks, partial sums atomically added to zeros
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _col_sum_chunk(
    x_ptr,
    out_ptr,
    rows,
    cols,
    stride_r,
    rows_per_chunk,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < cols
    r_start = tl.program_id(1) * rows_per_chunk
    r_end = tl.minimum(r_start + rows_per_chunk, rows)
    r_base = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for r0 in range(r_start, r_end, BLOCK_R):
        r = r0 + r_base
        mask = (r[:, None] < r_end) & c_ok[None, :]
        acc += tl.load(x_ptr + r[:, None].to(tl.int64) * stride_r + c[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + c, tl.sum(acc, axis=0), mask=c_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        block_r, block_c = 16, 128
        splits = max(1, min(triton.cdiv(rows, block_r), 128))
        rows_per_chunk = triton.cdiv(triton.cdiv(rows, splits), block_r) * block_r
        n_chunks = triton.cdiv(rows, rows_per_chunk)
        out = torch.zeros(cols, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(cols, block_c), n_chunks)
        _col_sum_chunk[grid](
            x, out, rows, cols, x.stride(0), rows_per_chunk, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4
        )
        return out
