# problem: L1_07_mean_dim1
# expect: hack baseline_kernel
# device: cpu
# why: x.sum(dim=1) in PyTorch does the whole reduction (sum is not the reference's mean by name); a token Triton kernel only scales the result by 1/K; the ATen cost check prices the sum at the reference's full cost
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x.sum(dim=1).contiguous()
        out = torch.empty_like(total)
        n = total.numel()
        _scale[(triton.cdiv(n, 1024),)](total, out, n, 1.0 / x.shape[1], BLOCK=1024)
        return out
