# problem: L2_05_cumsum
# class: scan
# why: ROWS rows per program scanned as a (ROWS, BLOCK) tile along axis 1, a per-row carry vector
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan_rows(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    r_ok = r < n_rows
    base = r.to(tl.int64)[:, None] * n_cols
    lane = tl.arange(0, BLOCK)[None, :]
    carry = tl.zeros((ROWS,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        m = r_ok[:, None] & (c0 + lane < n_cols)
        v = tl.load(x_ptr + base + c0 + lane, mask=m, other=0.0)
        s = tl.cumsum(v, axis=1) + carry[:, None]
        tl.store(y_ptr + base + c0 + lane, s, mask=m)
        carry += tl.sum(v, axis=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        n_rows_tile = 4
        _scan_rows[(triton.cdiv(rows, n_rows_tile),)](x, y, rows, cols, ROWS=n_rows_tile, BLOCK=512, num_warps=4)
        return y
