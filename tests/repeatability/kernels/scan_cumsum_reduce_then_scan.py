# problem: L2_05_cumsum
# class: scan
# why: reduce-then-scan: block totals, exclusive scan of the totals, each block rescanned from its offset
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _block_totals(x_ptr, tot_ptr, n_cols, n_blocks, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    c = blk * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=0.0)
    tl.store(tot_ptr + row * n_blocks + blk, tl.sum(v, axis=0))


@triton.jit
def _scan_totals(tot_ptr, n_blocks, NB: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, NB)
    ok = i < n_blocks
    t = tl.load(tot_ptr + row * n_blocks + i, mask=ok, other=0.0)
    tl.store(tot_ptr + row * n_blocks + i, tl.cumsum(t, axis=0) - t, mask=ok)


@triton.jit
def _block_rescan(x_ptr, off_ptr, y_ptr, n_cols, n_blocks, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    c = blk * BLOCK + tl.arange(0, BLOCK)
    ok = c < n_cols
    v = tl.load(x_ptr + row * n_cols + c, mask=ok, other=0.0)
    start = tl.load(off_ptr + row * n_blocks + blk)
    tl.store(y_ptr + row * n_cols + c, tl.cumsum(v, axis=0) + start, mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        block = 1024
        n_blocks = triton.cdiv(cols, block)
        offsets = torch.empty((rows, n_blocks), dtype=torch.float32, device=x.device)
        y = torch.empty_like(x)
        _block_totals[(rows, n_blocks)](x, offsets, cols, n_blocks, BLOCK=block, num_warps=4)
        _scan_totals[(rows,)](offsets, n_blocks, NB=triton.next_power_of_2(n_blocks), num_warps=4)
        _block_rescan[(rows, n_blocks)](x, offsets, y, cols, n_blocks, BLOCK=block, num_warps=4)
        return y
