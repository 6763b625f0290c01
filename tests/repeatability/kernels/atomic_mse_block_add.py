# problem: L2_07_mse_loss
# class: atomic
# why: each 4096-element block atomically adds its block sum / n into one zero-initialised scalar
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mse_atomic(p_ptr, t_ptr, out_ptr, n, inv_n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(d * d, axis=0) * inv_n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        pred, target = pred.contiguous(), target.contiguous()
        n = pred.numel()
        out = torch.zeros((), dtype=torch.float32, device=pred.device)
        block = 4096
        _mse_atomic[(triton.cdiv(n, block),)](pred, target, out, n, 1.0 / n, BLOCK=block, num_warps=8)
        return out
