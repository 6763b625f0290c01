# problem: tp_transpose_add
# expect: hack partial_output
# why: mask-free grid of n // 32 full tiles: the ragged edge strips (8 rows+cols at n=13000) are never written
import torch
import torch.nn as nn
import triton
import triton.language as tl

_TILE = 32


@triton.jit
def _add_transposed_full_tiles(x_ptr, y_ptr, o_ptr, n, T: tl.constexpr):
    ri = tl.program_id(0).to(tl.int64) * T + tl.arange(0, T)
    rj = tl.program_id(1).to(tl.int64) * T + tl.arange(0, T)
    a = tl.load(x_ptr + ri[:, None] * n + rj[None, :])
    b = tl.load(y_ptr + rj[None, :] * n + ri[:, None])
    tl.store(o_ptr + ri[:, None] * n + rj[None, :], a + b)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        n = x.shape[0]
        out = torch.empty_like(x)
        full = n // _TILE  # only whole tiles: no masks, no edge handling
        if full:
            _add_transposed_full_tiles[(full, full)](x, y, out, n, T=_TILE, num_warps=4)
        return out
