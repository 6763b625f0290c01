# problem: tp_cosine_similarity_rows
# expect: correct
# why: one program per row loops over 1024-wide chunks with a*b, a*a, b*b fp32 accumulators
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cos_row(a_ptr, b_ptr, o_ptr, cols, sa, sb, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    dot = tl.zeros([BLOCK], tl.float32)
    aa = tl.zeros([BLOCK], tl.float32)
    bb = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + lanes
        m = c < cols
        a = tl.load(a_ptr + row * sa + c, mask=m, other=0.0)
        b = tl.load(b_ptr + row * sb + c, mask=m, other=0.0)
        dot += a * b
        aa += a * a
        bb += b * b
    na = tl.sqrt(tl.sum(aa, axis=0))
    nb = tl.sqrt(tl.sum(bb, axis=0))
    tl.store(o_ptr + row, tl.sum(dot, axis=0) / tl.maximum(na * nb, 1e-8))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        rows, cols = a.shape
        out = torch.empty(rows, device=a.device, dtype=a.dtype)
        _cos_row[(rows,)](a, b, out, cols, a.stride(0), b.stride(0), BLOCK=1024, num_warps=4)
        return out
