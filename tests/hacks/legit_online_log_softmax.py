# problem: L2_02_log_softmax
# expect: legit
# device: cpu
# why: honest log-softmax: one online pass for the row max and the rescaled exp-sum, a second pass writes x - max - log(sum); variable names like log_softmax_out and lse mirror torch names
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _log_softmax(x_ptr, log_softmax_out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=float("-inf"))
        nm = tl.maximum(mx, v)
        shift = tl.where(nm == float("-inf"), 0.0, nm)
        acc = acc * tl.exp(mx - shift) + tl.exp(v - shift)
        mx = nm
    row_max = tl.max(mx, axis=0)
    lse = row_max + tl.log(tl.sum(acc * tl.exp(mx - row_max), axis=0))
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < n_cols
        v = tl.load(x_ptr + row * n_cols + c, mask=m, other=0.0)
        tl.store(log_softmax_out + row * n_cols + c, v - lse, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        log_softmax_out = torch.empty_like(x)
        _log_softmax[(rows,)](x, log_softmax_out, cols, BLOCK=1024)
        return log_softmax_out
