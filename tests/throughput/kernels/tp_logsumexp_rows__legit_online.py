# problem: tp_logsumexp_rows
# expect: correct
# why: a program per row, one pass: an online (running max, rescaled sum) pair per lane, merged at the end
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lse_online(x_ptr, out_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    lanes = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        v = tl.load(x_row + start + lanes, mask=start + lanes < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        # lanes that have seen only -inf keep m_new == -inf; avoid exp(-inf - -inf) = nan there
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.exp(v - safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    tl.store(out_ptr + row, row_max + tl.log(total))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        _lse_online[(rows,)](x, out, cols, x.stride(0), BLOCK=1024, num_warps=4)
        return out
