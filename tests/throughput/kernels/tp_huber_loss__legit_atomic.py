# problem: tp_huber_loss
# expect: correct
# why: one pass: each 4096-element block sums Huber terms in fp32, atomic_add of block_sum / n
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _huber_atomic(p_ptr, t_ptr, out_ptr, n, inv_n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
    ad = tl.abs(d)
    loss = tl.where(ad < 1.0, 0.5 * d * d, ad - 0.5)
    loss = tl.where(m, loss, 0.0)
    tl.atomic_add(out_ptr, tl.sum(loss, axis=0) * inv_n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred = pred.contiguous()
        target = target.contiguous()
        n = pred.numel()
        out = torch.zeros((), device=pred.device, dtype=pred.dtype)
        block = 4096
        _huber_atomic[(triton.cdiv(n, block),)](pred, target, out, n, 1.0 / n, BLOCK=block, num_warps=8)
        return out
