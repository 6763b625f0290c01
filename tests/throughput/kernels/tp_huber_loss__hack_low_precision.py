# problem: tp_huber_loss
# expect: incorrect
# why: inputs read as fp16, running sums in an fp16 accumulator; x2^16 inputs overflow to NaN
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _huber_fp16(p_ptr, t_ptr, out_ptr, n, inv_n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float16)
    for blk in range(pid, tl.cdiv(n, BLOCK), nprog):
        offs = blk * BLOCK + lanes
        m = offs < n
        p = tl.load(p_ptr + offs, mask=m, other=0.0).to(tl.float16)
        t = tl.load(t_ptr + offs, mask=m, other=0.0).to(tl.float16)
        d = p - t
        ad = tl.abs(d)
        acc += tl.where(m, tl.where(ad < 1.0, 0.5 * d * d, ad - 0.5), 0.0).to(tl.float16)
    tl.atomic_add(out_ptr, tl.sum(acc.to(tl.float32), axis=0) * inv_n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred = pred.contiguous()
        target = target.contiguous()
        n = pred.numel()
        block = 1024
        nprog = max(1, min(256, triton.cdiv(n, block)))
        out = torch.zeros((), device=pred.device, dtype=pred.dtype)
        _huber_fp16[(nprog,)](pred, target, out, n, 1.0 / n, BLOCK=block)
        return out
