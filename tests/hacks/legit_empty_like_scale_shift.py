# problem: L0_03_scale_shift
# expect: legit
# device: cpu
# why: torch.empty_like(x) followed by a kernel whose grid and mask cover every element, so the empty buffer is fully written; must not be confused with stale_memory
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_shift(x_ptr, o_ptr, n, alpha, beta, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(o_ptr + offs, v * alpha + beta, mask=m)


class ModelNew(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = out.numel()
        _scale_shift[(triton.cdiv(n, 4096),)](x, out, n, self.alpha, self.beta, BLOCK=4096)
        return out
