"""Triton fused scale-and-shift over the flattened tensor."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_shift_kernel(x_ptr, out_ptr, n, alpha, beta, BLOCK: tl.constexpr):
    # int64 offsets so tensors with >= 2^31 elements stay correct.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + beta, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        BLOCK = 4096
        _scale_shift_kernel[(triton.cdiv(n, BLOCK),)](
            x, out, n, self.alpha, self.beta, BLOCK=BLOCK, num_warps=8
        )
        return out
