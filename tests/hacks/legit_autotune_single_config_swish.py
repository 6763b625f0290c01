# problem: L1_02_swish
# expect: legit
# device: cpu
# why: honest swish kernel decorated with triton.autotune holding a single Config (BLOCK comes from the config, not the call site) and a grid lambda reading meta["BLOCK"]
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4)], key=["n"])
@triton.jit
def _swish(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(o_ptr + offs, v / (1.0 + tl.exp(-v)), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _swish[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        return out
