# problem: L1_05_row_sum
# expect: legit
# device: cpu
# why: row sums accumulated from the last block to the first in a 2048-lane fp32 vector, then one tree sum: another summation order than PyTorch's, equally accurate
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _reverse_row_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_blocks):
        start = (n_blocks - 1 - i) * BLOCK
        m = start + lanes < n_cols
        acc += tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        _reverse_row_sum[(rows,)](x, out, cols, BLOCK=2048)
        return out
