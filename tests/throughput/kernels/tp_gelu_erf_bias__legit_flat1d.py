# problem: tp_gelu_erf_bias
# expect: correct
# why: flat 1-D grid, int64 offsets, BLOCK 2048: bias gathered at offs % cols, erf GELU fused in one pass
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_bias_flat(x_ptr, b_ptr, o_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    b = tl.load(b_ptr + offs % cols, mask=m, other=0.0)
    y = x + b
    out = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(o_ptr + offs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        bias = bias.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        cols = x.shape[-1]
        block = 2048
        _gelu_bias_flat[(triton.cdiv(n, block),)](x, bias, out, n, cols, BLOCK=block, num_warps=8)
        return out
