# problem: L1_04_hardswish
# class: elementwise
# why: hardswish as x * clamp(x + 3, 0, 6) / 6 with minimum/maximum, one flat 1-D launch of 8192-wide blocks
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _hswish(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    gate = tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0)
    tl.store(o_ptr + offs, x * gate * (1.0 / 6.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _hswish[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192, num_warps=16)
        return out
