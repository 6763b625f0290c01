"""Row-wise cumsum in Triton: one program per row, block scans with tl.cumsum plus a running carry."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    offs = tl.arange(0, BLOCK)

    carry = tl.zeros([], tl.float32)  # sum of all earlier blocks of this row
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=0.0)
        tl.store(out_row + start + offs, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, "expects (rows, cols)"
        x = x.contiguous()
        out = torch.empty_like(x)
        _cumsum_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024, num_warps=4)
        return out
