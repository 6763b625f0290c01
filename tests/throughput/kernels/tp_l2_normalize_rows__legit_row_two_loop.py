# problem: tp_l2_normalize_rows
# expect: correct
# why: a program per row: a loop for the sum of squares in lanes, a second loop storing x / max(norm, eps)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _l2norm_row(x_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    lanes = tl.arange(0, BLOCK)
    ss = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        v = tl.load(x_row + start + lanes, mask=m, other=0.0)
        ss += v * v
    denom = tl.maximum(tl.sqrt(tl.sum(ss, axis=0)), eps)
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        v = tl.load(x_row + start + lanes, mask=m, other=0.0)
        tl.store(y_row + start + lanes, v / denom, mask=m)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        _l2norm_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), self.eps, BLOCK=2048, num_warps=8)
        return y
