# problem: tiny_softmax
# class: tiny
# why: the whole short row in one power-of-two block per program: max, exp, sum and store from registers, one read
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    ok = c < n_cols
    v = tl.load(x_ptr + row * stride + c, mask=ok, other=float("-inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + row * stride + c, e / tl.sum(e, axis=0), mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        _softmax_row[(rows,)](x, y, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=4)
        return y
