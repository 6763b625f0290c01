# problem: tp_huber_loss
# expect: correct
# why: <=1024 programs grid-stride into fp32 partials; a 1-program kernel sums them in order / n
import torch
import torch.nn as nn
import triton
import triton.language as tl

_MAX_PROGRAMS = 1024


@triton.jit
def _huber_partials(p_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for blk in range(pid, tl.cdiv(n, BLOCK), nprog):
        offs = blk * BLOCK + lanes
        m = offs < n
        d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
        ad = tl.abs(d)
        acc += tl.where(m, tl.where(ad < 1.0, 0.5 * d * d, ad - 0.5), 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _sum_partials(part_ptr, out_ptr, nparts, inv_n, P: tl.constexpr):
    idx = tl.arange(0, P)
    vals = tl.load(part_ptr + idx, mask=idx < nparts, other=0.0)
    tl.store(out_ptr, tl.sum(vals, axis=0) * inv_n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred = pred.contiguous()
        target = target.contiguous()
        n = pred.numel()
        block = 2048
        nprog = max(1, min(_MAX_PROGRAMS, triton.cdiv(n, block)))
        partials = torch.empty(nprog, device=pred.device, dtype=torch.float32)
        _huber_partials[(nprog,)](pred, target, partials, n, BLOCK=block, num_warps=8)
        out = torch.empty((), device=pred.device, dtype=pred.dtype)
        _sum_partials[(1,)](partials, out, nprog, 1.0 / n, P=triton.next_power_of_2(nprog))
        return out
