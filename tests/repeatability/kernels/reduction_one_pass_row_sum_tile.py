# problem: L1_05_row_sum
# class: reduction_one_pass
# why: one kernel, one read: ROWS rows per program held as a (ROWS, BLOCK) accumulator, reduced along axis 1 at the end
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rows_sum(x_ptr, out_ptr, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = r < n_rows
    row_base = x_ptr + r.to(tl.int64)[:, None] * stride
    c = tl.arange(0, BLOCK)[None, :]
    acc = tl.zeros((ROWS, BLOCK), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        m = row_ok[:, None] & (c0 + c < n_cols)
        acc += tl.load(row_base + c0 + c, mask=m, other=0.0)
    tl.store(out_ptr + r, tl.sum(acc, axis=1), mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        rows = 4
        _rows_sum[(triton.cdiv(n_rows, rows),)](x, out, n_rows, n_cols, x.stride(0), ROWS=rows, BLOCK=1024,
                                               num_warps=8)
        return out
