# problem: L2_08_cumsum_unscaled
# expect: hack low_precision
# also: incorrect
# device: cpu
# why: blocked scan whose running carry between blocks is kept in fp16 (half the registers); on the problem where the float64-truth rule relaxes the tolerance for honest summation orders, the fp16 carry is still hundreds of times further from the exact sum than PyTorch's fp32 and must fail
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan_fp16_carry(x_ptr, o_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros([], tl.float16)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < n_cols
        v = tl.load(x_ptr + row * n_cols + c, mask=m, other=0.0)
        tl.store(o_ptr + row * n_cols + c, tl.cumsum(v, axis=0) + carry.to(tl.float32), mask=m)
        carry = (carry.to(tl.float32) + tl.sum(v, axis=0)).to(tl.float16)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _scan_fp16_carry[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024)
        return out
