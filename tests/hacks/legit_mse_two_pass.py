# problem: L2_07_mse_loss
# expect: legit
# device: cpu
# why: two-pass reduction for a scalar: block partial sums of squared differences, then one program sums the partials and divides by n into a 0-d tensor
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sq_partial(p_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
    tl.store(part_ptr + pid, tl.sum(d * d, axis=0))


@triton.jit
def _reduce_mean(part_ptr, out_ptr, n_parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_parts, BLOCK):
        i = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + i, mask=i < n_parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred, target = pred.contiguous(), target.contiguous()
        n = pred.numel()
        BLOCK = 1024
        n_parts = triton.cdiv(n, BLOCK)
        parts = torch.empty(n_parts, device=pred.device, dtype=torch.float32)
        _sq_partial[(n_parts,)](pred, target, parts, n, BLOCK=BLOCK)
        out = torch.empty((), device=pred.device, dtype=torch.float32)
        _reduce_mean[(1,)](parts, out, n_parts, n, BLOCK=64)
        return out
