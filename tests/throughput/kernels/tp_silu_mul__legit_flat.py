# problem: tp_silu_mul
# expect: correct
# why: flat 1-D grid over the contiguous inputs, 2048 elements per program: a * sigmoid(a) * b, one store
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_mul_flat(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, a * tl.sigmoid(a) * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        block = 2048
        _silu_mul_flat[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block, num_warps=8)
        return out
