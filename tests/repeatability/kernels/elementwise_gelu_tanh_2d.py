# problem: L1_01_gelu_tanh
# class: elementwise
# why: 2-D launch grid (row, column block) over a strided view; tanh computed from exp(-2|u|) so it never overflows
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_rows(x_ptr, y_ptr, n_cols, sx_row, sy_row, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * sx_row + cols, mask=keep, other=0.0)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(u < 0, -t, t)
    tl.store(y_ptr + row * sy_row + cols, 0.5 * x * (1.0 + t), mask=keep)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(1) != 1:
            x2 = x2.contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        block = 2048
        grid = (x2.shape[0], triton.cdiv(x2.shape[1], block))
        _gelu_rows[grid](x2, y, x2.shape[1], x2.stride(0), y.stride(0), BLOCK=block, num_warps=8)
        return y.view(x.shape)
