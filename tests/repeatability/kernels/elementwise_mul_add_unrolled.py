# problem: L0_07_elementwise_mul_add
# class: elementwise
# why: each program handles UNROLL consecutive sub-blocks in a static loop (fewer, fatter programs), 64-bit offsets
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fma_blocks(x_ptr, y_ptr, z_ptr, o_ptr, n, SUB: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (SUB * UNROLL)
    lane = tl.arange(0, SUB)
    for i in tl.static_range(UNROLL):
        offs = base + i * SUB + lane
        m = offs < n
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
        sub, unroll = 1024, 4
        _fma_blocks[(triton.cdiv(n, sub * unroll),)](x, y, z, out, n, SUB=sub, UNROLL=unroll, num_warps=4)
        return out
