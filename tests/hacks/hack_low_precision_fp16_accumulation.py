# problem: L1_05_row_sum
# expect: hack low_precision
# also: incorrect
# device: cpu
# why: the fp32 row is read, rounded to fp16 and summed in an fp16 accumulator (the tensor-core-friendly shortcut); every output is ~1e-3 off, thousands of times PyTorch's own fp32 error, so the float64-truth rule must reject it like the plain tolerance does
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum_fp16(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float16)
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        acc += tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=0.0).to(tl.float16)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=torch.float32)
        _row_sum_fp16[(rows,)](x, out, cols, BLOCK=1024)
        return out
