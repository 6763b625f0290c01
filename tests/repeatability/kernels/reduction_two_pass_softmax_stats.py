# problem: L2_01_softmax
# class: reduction_two_pass
# why: pass 1: per-row (max, 1/sum exp) by an online rescale; pass 2: a 2-D launch that normalises
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_stats(x_ptr, stats_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lane = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        v = tl.load(x_ptr + row * stride + c0 + lane, mask=c0 + lane < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        # lanes that have seen nothing yet keep m_new = -inf: guard the rescale against inf - inf
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.exp(v - safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    tl.store(stats_ptr + 2 * row, row_max)
    tl.store(stats_ptr + 2 * row + 1, 1.0 / total)


@triton.jit
def _normalise(x_ptr, stats_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < n_cols
    row_max = tl.load(stats_ptr + 2 * row)
    inv = tl.load(stats_ptr + 2 * row + 1)
    v = tl.load(x_ptr + row * stride + cols, mask=ok, other=0.0)
    tl.store(y_ptr + row * stride + cols, tl.exp(v - row_max) * inv, mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        stats = torch.empty((rows, 2), dtype=torch.float32, device=x.device)
        y = torch.empty_like(x)
        _row_stats[(rows,)](x, stats, cols, x.stride(0), BLOCK=2048, num_warps=8)
        _normalise[(rows, triton.cdiv(cols, 4096))](x, stats, y, cols, x.stride(0), BLOCK=4096, num_warps=8)
        return y
