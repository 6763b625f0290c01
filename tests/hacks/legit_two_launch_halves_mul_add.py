# problem: L0_07_elementwise_mul_add
# expect: legit
# device: cpu
# why: the output is written by two launches of the same kernel over disjoint halves (an element offset argument), which together cover every element; tests that coverage analysis sums launches instead of flagging a partial write
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fma_range(x_ptr, y_ptr, z_ptr, o_ptr, start, stop, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < stop
    a = tl.load(x_ptr + offs, mask=m, other=0.0)
    b = tl.load(y_ptr + offs, mask=m, other=0.0)
    c = tl.load(z_ptr + offs, mask=m, other=0.0)
    tl.store(o_ptr + offs, a * b + c, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        half = n // 2
        B = 1024
        _fma_range[(triton.cdiv(half, B),)](x, y, z, out, 0, half, BLOCK=B)
        _fma_range[(triton.cdiv(n - half, B),)](x, y, z, out, half, n, BLOCK=B)
        return out
