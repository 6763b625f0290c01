# problem: L1_07_mean_dim1
# class: atomic
# why: (batch, R slab, column block) grid; each slab's column sums / R atomically added to a zeroed output
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mean_slab_atomic(x_ptr, out_ptr, R, C, s_b, s_r, rows_per_slab, inv_r, BLOCK_C: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    r_lo = tl.program_id(1) * rows_per_slab
    cols = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for i in range(0, rows_per_slab):
        r = r_lo + i
        acc += tl.load(x_ptr + b * s_b + r.to(tl.int64) * s_r + cols, mask=col_ok & (r < R), other=0.0)
    tl.atomic_add(out_ptr + b * C + cols, acc * inv_r, mask=col_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, R, C = x.shape
        slabs = min(4, R)
        per_slab = triton.cdiv(R, slabs)
        block_c = 256
        out = torch.zeros((B, C), dtype=torch.float32, device=x.device)
        grid = (B, slabs, triton.cdiv(C, block_c))
        _mean_slab_atomic[grid](x, out, R, C, x.stride(0), x.stride(1), per_slab, 1.0 / R, BLOCK_C=block_c,
                                num_warps=4)
        return out
