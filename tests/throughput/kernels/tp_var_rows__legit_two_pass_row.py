# problem: tp_var_rows
# expect: correct
# why: one program per row: pass 1 sums for the mean, pass 2 sums squared deviations; / (cols - 1)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _var_two_pass(x_ptr, o_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + lanes
        acc += tl.load(base + c, mask=c < cols, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + lanes
        m = c < cols
        d = tl.where(m, tl.load(base + c, mask=m, other=0.0) - mean, 0.0)
        acc2 += d * d
    tl.store(o_ptr + row, tl.sum(acc2, axis=0) / (cols - 1))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        x2 = x.view(-1, cols)
        rows = x2.shape[0]
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        _var_two_pass[(rows,)](x2, out, cols, x2.stride(0), BLOCK=2048, num_warps=8)
        return out.view(x.shape[:-1])
