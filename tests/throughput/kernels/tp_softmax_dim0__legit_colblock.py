# problem: tp_softmax_dim0
# expect: correct
# why: one program per 32-col block: pass 1 online column max/exp-sum over 64-row tiles, pass 2 writes
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_cols(x_ptr, o_ptr, R, C, sx, so, BR: tl.constexpr, BC: tl.constexpr):
    rc = tl.program_id(0) * BC + tl.arange(0, BC)
    c_ok = rc < C
    m = tl.full((BC,), float("-inf"), tl.float32)
    s = tl.zeros((BC,), tl.float32)
    for r0 in range(0, R, BR):
        rr = (r0 + tl.arange(0, BR)).to(tl.int64)
        ok = (rr[:, None] < R) & c_ok[None, :]
        v = tl.load(x_ptr + rr[:, None] * sx + rc[None, :], mask=ok, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(v, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new[None, :]), axis=0)
        m = m_new
    inv = 1.0 / s
    for r0 in range(0, R, BR):
        rr = (r0 + tl.arange(0, BR)).to(tl.int64)
        ok = (rr[:, None] < R) & c_ok[None, :]
        v = tl.load(x_ptr + rr[:, None] * sx + rc[None, :], mask=ok, other=float("-inf"))
        tl.store(o_ptr + rr[:, None] * so + rc[None, :], tl.exp(v - m[None, :]) * inv[None, :], mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        R, C = x.shape
        out = torch.empty_like(x)
        _softmax_cols[(triton.cdiv(C, 32),)](x, out, R, C, x.stride(0), out.stride(0), BR=64, BC=32, num_warps=4)
        return out
