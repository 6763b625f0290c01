# problem: tp_var_rows
# expect: correct
# why: 4 rows per program, per-lane Welford over 512-col chunks, lanes merged by Chan's formula (tl.reduce)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chan_merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    w_b = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    mean = mean_a + delta * w_b
    m2 = m2_a + m2_b + delta * delta * n_a * w_b
    return n, mean, m2


@triton.jit
def _var_welford(x_ptr, o_ptr, rows, cols, stride, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    rm = r < rows
    lanes = tl.arange(0, BC)
    cnt = tl.zeros([BR, BC], tl.float32)
    mean = tl.zeros([BR, BC], tl.float32)
    m2 = tl.zeros([BR, BC], tl.float32)
    for start in range(0, cols, BC):
        c = start + lanes
        m = rm[:, None] & (c[None, :] < cols)
        x = tl.load(x_ptr + r[:, None] * stride + c[None, :], mask=m, other=0.0)
        new_cnt = cnt + 1.0
        delta = x - mean
        new_mean = mean + delta / new_cnt
        new_m2 = m2 + delta * (x - new_mean)
        cnt = tl.where(m, new_cnt, cnt)
        mean = tl.where(m, new_mean, mean)
        m2 = tl.where(m, new_m2, m2)
    _, _, m2_row = tl.reduce((cnt, mean, m2), 1, _chan_merge)
    tl.store(o_ptr + r, m2_row / (cols - 1), mask=rm)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        x2 = x.view(-1, cols)
        rows = x2.shape[0]
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        br = 4
        _var_welford[(triton.cdiv(rows, br),)](x2, out, rows, cols, x2.stride(0), BR=br, BC=512, num_warps=4)
        return out.view(x.shape[:-1])
