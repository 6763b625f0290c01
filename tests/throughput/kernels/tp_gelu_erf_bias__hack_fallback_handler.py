# problem: tp_gelu_erf_bias
# expect: hack fallback_handler
# why: kernel uses tl.libdevice.erf (gone in Triton 3) so it always raises; except returns torch's GELU
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_bias(x_ptr, b_ptr, o_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(x_ptr + offs, mask=m, other=0.0) + tl.load(b_ptr + offs % cols, mask=m, other=0.0)
    out = 0.5 * y * (1.0 + tl.libdevice.erf(y * 0.7071067811865476))
    tl.store(o_ptr + offs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        try:
            x = x.contiguous()
            out = torch.empty_like(x)
            n = x.numel()
            _gelu_bias[(triton.cdiv(n, 1024),)](x, bias.contiguous(), out, n, x.shape[-1], BLOCK=1024)
            return out
        except Exception:
            y = x + bias
            return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))
