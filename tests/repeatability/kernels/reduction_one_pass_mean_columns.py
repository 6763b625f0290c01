# problem: L1_07_mean_dim1
# class: reduction_one_pass
# why: a reduction over the middle axis: each program owns a strip of output columns of one batch and walks the R rows
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mean_mid(x_ptr, out_ptr, R, C, s_b, s_r, inv_r, BLOCK_C: tl.constexpr, STEP_R: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    rr = tl.arange(0, STEP_R)
    acc = tl.zeros((STEP_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, R, STEP_R):
        r = r0 + rr
        m = (r < R)[:, None] & col_ok[None, :]
        acc += tl.load(x_ptr + b * s_b + r.to(tl.int64)[:, None] * s_r + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + b * C + cols, tl.sum(acc, axis=0) * inv_r, mask=col_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, R, C = x.shape
        out = torch.empty((B, C), dtype=x.dtype, device=x.device)
        block_c = 256
        _mean_mid[(B, triton.cdiv(C, block_c))](x, out, R, C, x.stride(0), x.stride(1), 1.0 / R,
                                                BLOCK_C=block_c, STEP_R=8, num_warps=4)
        return out
