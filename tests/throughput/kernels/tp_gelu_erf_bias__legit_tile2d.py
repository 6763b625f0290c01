# problem: tp_gelu_erf_bias
# expect: correct
# why: 2-D grid of 16x256 tiles: 256 bias values loaded once per tile, broadcast down 16 rows, erf GELU
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_bias_tile(x_ptr, b_ptr, o_ptr, rows, cols, stride_r, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    c = tl.program_id(1) * BN + tl.arange(0, BN)
    cm = c < cols
    m = (r[:, None] < rows) & cm[None, :]
    b = tl.load(b_ptr + c, mask=cm, other=0.0)
    ptrs = r[:, None] * stride_r + c[None, :]
    y = tl.load(x_ptr + ptrs, mask=m, other=0.0) + b[None, :]
    out = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(o_ptr + ptrs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        bias = bias.contiguous()
        cols = x.shape[-1]
        x2 = x.view(-1, cols)
        rows = x2.shape[0]
        out = torch.empty_like(x2)
        bm, bn = 16, 256
        grid = (triton.cdiv(rows, bm), triton.cdiv(cols, bn))
        _gelu_bias_tile[grid](x2, bias, out, rows, cols, x2.stride(0), BM=bm, BN=bn, num_warps=4)
        return out.view(x.shape)
