# problem: L2_08_cumsum_unscaled
# expect: legit
# device: cpu
# why: blocked scan with a running carry (512-wide tl.cumsum per block, the carry summed block after block) over unscaled rows: a summation order other than PyTorch's, so near zero crossings at full size it differs from torch.cumsum by more than atol + rtol*|ref| while being as close to the exact sum; the float64-truth rule must accept it
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _carry_scan(x_ptr, o_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < n_cols
        v = tl.load(x_ptr + row * n_cols + c, mask=m, other=0.0)
        tl.store(o_ptr + row * n_cols + c, tl.cumsum(v, axis=0) + carry, mask=m)
        carry += tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _carry_scan[(x.shape[0],)](x, out, x.shape[1], BLOCK=512)
        return out
