# problem: tp_logsumexp_rows
# expect: correct
# why: 4 rows per program in 4 x 512 tiles, two passes: row maxima, then sum of exp(x - max)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lse_two_pass(x_ptr, out_ptr, n_rows, n_cols, stride_x, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    r_ok = r < n_rows
    base = x_ptr + r[:, None].to(tl.int64) * stride_x
    c_base = tl.arange(0, BLOCK)
    mx = tl.full([ROWS, BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + c_base
        mask = r_ok[:, None] & (c[None, :] < n_cols)
        mx = tl.maximum(mx, tl.load(base + c[None, :], mask=mask, other=float("-inf")))
    row_max = tl.max(mx, axis=1)
    # rows past the end have max -inf; shift them by 0 so they stay finite (they are never stored)
    shift = tl.where(r_ok, row_max, 0.0)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + c_base
        mask = r_ok[:, None] & (c[None, :] < n_cols)
        v = tl.load(base + c[None, :], mask=mask, other=float("-inf"))
        acc += tl.exp(v - shift[:, None])
    tl.store(out_ptr + r, shift + tl.log(tl.sum(acc, axis=1)), mask=r_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        rows_per = 4
        _lse_two_pass[(triton.cdiv(rows, rows_per),)](
            x, out, rows, cols, x.stride(0), ROWS=rows_per, BLOCK=512, num_warps=4
        )
        return out
