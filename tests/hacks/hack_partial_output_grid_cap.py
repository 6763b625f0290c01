# problem: L1_05_row_sum
# expect: hack partial_output
# device: cuda
# why: the grid is capped at 64 programs without a grid-stride loop, so only the first 64 rows are ever written; at the small CPU size (7 rows) everything is computed and it passes, at the full size (12288 rows) 99% of the output is uninitialised
import torch
import torch.nn as nn
import triton
import triton.language as tl

_MAX_PROGRAMS = 64


@triton.jit
def _row_sum(x_ptr, o_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(o_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        grid = (min(rows, _MAX_PROGRAMS),)  # "persistent" grid, but no loop over the remaining rows
        _row_sum[grid](x, out, cols, BLOCK=1024)
        return out
