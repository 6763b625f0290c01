# problem: L1_06_row_max
# expect: legit
# device: cpu
# why: honest row-max kernel whose BLOCK is chosen by triton.heuristics from n_cols; the launch passes no BLOCK at all
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"BLOCK": lambda args: min(2048, triton.next_power_of_2(args["n_cols"]))})
@triton.jit
def _row_max(x_ptr, o_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=float("-inf"))
        best = tl.maximum(best, v)
    tl.store(o_ptr + row, tl.max(best, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        _row_max[(rows,)](x, out, cols, x.stride(0))
        return out
