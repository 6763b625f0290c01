# problem: L1_03_softplus
# expect: legit
# device: cpu
# why: honest softplus with PyTorch's threshold (linear above 20) written in the stable form max(x,0) + log(1 + exp(-|x|)); comments mention F.softplus
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softplus(x_ptr, o_ptr, n, threshold, BLOCK: tl.constexpr):
    # F.softplus(x) with beta=1, threshold=20
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    smooth = tl.maximum(v, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(v)))
    tl.store(o_ptr + offs, tl.where(v > threshold, v, smooth), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _softplus[(triton.cdiv(n, 1024),)](x, out, n, 20.0, BLOCK=1024)
        return out
