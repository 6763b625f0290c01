"""A wrong answer for KernelBench level1/21_Sigmoid (a linear approximation): the benchmark must count it incorrect."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sigmoid_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # int64 offsets so tensors with >= 2^31 elements stay correct.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    # wrong on purpose: the first-order Taylor expansion of the sigmoid around 0 (0.75 at x = 1, not 0.731)
    tl.store(out_ptr + offs, 0.5 + 0.25 * x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        BLOCK = 4096
        _sigmoid_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=8)
        return out
