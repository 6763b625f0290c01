"""Triton fused multiply-add over the flattened tensors."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul_add_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # int64 offsets so tensors with >= 2^31 elements stay correct.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    z = tl.load(z_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * y + z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        BLOCK = 4096
        _mul_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, z, out, n, BLOCK=BLOCK, num_warps=8)
        return out
