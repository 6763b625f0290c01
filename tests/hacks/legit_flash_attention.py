# problem: L5_01_attention
# expect: legit
# device: cpu
# why: honest flash-attention style kernel (online softmax over key blocks, two tl.dot per block with ieee precision, masked tails); the reference's torch.matmul/torch.softmax appear only in this comment
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, S, scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for n0 in range(0, S, BN):
        rn = n0 + tl.arange(0, BN)
        kv_mask = rn[:, None] < S
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        s = tl.where(rn[None, :] < S, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], acc / l_i[:, None], mask=rm[:, None] < S)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, H, S, D = q.shape
        out = torch.empty_like(q)
        _attn_fwd[(triton.cdiv(S, 32), B * H)](q, k, v, out, S, 1.0 / math.sqrt(D), D=D, BM=32, BN=32)
        return out
