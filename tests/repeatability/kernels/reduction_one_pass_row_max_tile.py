# problem: L1_06_row_max
# class: reduction_one_pass
# why: running elementwise maximum over 4096-wide chunks, masked lanes read as -inf, one tl.max per row at the end
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride
    lane = tl.arange(0, BLOCK)
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        v = tl.load(base + c0 + lane, mask=c0 + lane < n_cols, other=float("-inf"))
        best = tl.maximum(best, v)
    tl.store(out_ptr + row, tl.max(best, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        _row_max[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK=4096, num_warps=16)
        return out
