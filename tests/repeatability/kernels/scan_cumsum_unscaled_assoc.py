# problem: L2_08_cumsum_unscaled
# class: scan
# why: tl.associative_scan with its own add per 2048 block; carry = the last element of the last scan
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _plus(a, b):
    return a + b


@triton.jit
def _assoc_scan(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lane = tl.arange(0, BLOCK)
    carry = tl.zeros((1,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        m = c0 + lane < n_cols
        v = tl.load(x_ptr + row * stride + c0 + lane, mask=m, other=0.0)
        s = tl.associative_scan(v, 0, _plus) + carry
        tl.store(y_ptr + row * stride + c0 + lane, s, mask=m)
        carry = tl.max(tl.where(lane == BLOCK - 1, s, float("-inf")), axis=0, keep_dims=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        _assoc_scan[(rows,)](x, y, cols, x.stride(0), BLOCK=2048, num_warps=8)
        return y
