# problem: L1_05_row_sum
# class: atomic
# why: (row, split) grid: each program sums a slice of a row and atomically adds it to that row's output
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_slice_sum(x_ptr, out_ptr, n_cols, stride, cols_per_split, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lo = tl.program_id(1) * cols_per_split
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols_per_split, BLOCK):
        c = lo + c0 + lane
        acc += tl.load(x_ptr + row * stride + c, mask=(c < n_cols) & (c0 + lane < cols_per_split), other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        block = 2048
        splits = max(1, min(16, triton.cdiv(n_cols, 4 * block)))
        per_split = triton.cdiv(n_cols, splits)
        out = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
        _row_slice_sum[(n_rows, splits)](x, out, n_cols, x.stride(0), per_split, BLOCK=block, num_warps=8)
        return out
