# problem: L0_05_leaky_relu
# expect: legit
# device: cpu
# why: the kernel is launched through a module-level alias (leaky = _leaky_relu_kernel), not its def name; tests that launch detection resolves simple aliases
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _leaky_relu_kernel(x_ptr, o_ptr, n, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(o_ptr + offs, tl.maximum(v, 0.0) + slope * tl.minimum(v, 0.0), mask=m)


leaky = _leaky_relu_kernel


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        o = torch.empty_like(x)
        n = x.numel()
        leaky[(triton.cdiv(n, 512),)](x, o, n, self.negative_slope, BLOCK=512)
        return o
