# problem: tp_l2_normalize_rows
# expect: correct
# why: two kernels: 4 rows per program write 1 / max(norm, eps), then a (row, block) grid scales
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _inv_norms(x_ptr, inv_ptr, n_rows, n_cols, stride_x, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    r_ok = r < n_rows
    c_base = tl.arange(0, BLOCK)
    ss = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + c_base
        mask = r_ok[:, None] & (c[None, :] < n_cols)
        v = tl.load(x_ptr + r[:, None].to(tl.int64) * stride_x + c[None, :], mask=mask, other=0.0)
        ss += v * v
    norm = tl.sqrt(tl.sum(ss, axis=1))
    tl.store(inv_ptr + r, 1.0 / tl.maximum(norm, eps), mask=r_ok)


@triton.jit
def _scale_rows(x_ptr, inv_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = c < n_cols
    inv = tl.load(inv_ptr + row)
    v = tl.load(x_ptr + row * stride_x + c, mask=m, other=0.0)
    tl.store(y_ptr + row * stride_y + c, v * inv, mask=m)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        inv = torch.empty(rows, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        rows_per = 4
        _inv_norms[(triton.cdiv(rows, rows_per),)](
            x, inv, rows, cols, x.stride(0), self.eps, ROWS=rows_per, BLOCK=512, num_warps=4
        )
        block = 1024
        _scale_rows[(rows, triton.cdiv(cols, block))](
            x, inv, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4
        )
        return y
