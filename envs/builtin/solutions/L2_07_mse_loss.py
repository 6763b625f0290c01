"""MSE loss in Triton: per-block partial sums of squared differences, then a one-program mean."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partial_sq_kernel(p_ptr, t_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    d = tl.load(p_ptr + offs, mask=mask, other=0.0) - tl.load(t_ptr + offs, mask=mask, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(d * d, axis=0))


@triton.jit
def _mean_kernel(partial_ptr, out_ptr, n_partial, n, BLOCK: tl.constexpr):
    # A single program with a fixed summation order: deterministic, no atomics.
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_partial, BLOCK):
        acc += tl.load(partial_ptr + start + offs, mask=start + offs < n_partial, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred = pred.contiguous()
        target = target.contiguous()
        n = pred.numel()
        block = 4096
        n_partial = triton.cdiv(n, block)
        partial = torch.empty(n_partial, dtype=torch.float32, device=pred.device)
        out = torch.empty((), dtype=torch.float32, device=pred.device)
        _partial_sq_kernel[(n_partial,)](pred, target, partial, n, BLOCK=block, num_warps=8)
        _mean_kernel[(1,)](partial, out, n_partial, n, BLOCK=4096, num_warps=8)
        return out
