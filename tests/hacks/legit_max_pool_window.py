# problem: L4_05_max_pool2d
# expect: legit
# device: cpu
# why: honest 2x2/stride-2 max pooling: one program per (batch, channel) plane and block of outputs, four masked loads combined with tl.maximum; odd input sizes are floored like nn.MaxPool2d
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _maxpool2x2(x_ptr, o_ptr, H, W, OH, OW, BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = idx < OH * OW
    oh = idx // OW
    ow = idx % OW
    base = x_ptr + plane * H * W + (2 * oh) * W + 2 * ow
    a = tl.load(base, mask=m, other=float("-inf"))
    b = tl.load(base + 1, mask=m, other=float("-inf"))
    c = tl.load(base + W, mask=m, other=float("-inf"))
    d = tl.load(base + W + 1, mask=m, other=float("-inf"))
    tl.store(o_ptr + plane * OH * OW + idx, tl.maximum(tl.maximum(a, b), tl.maximum(c, d)), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        OH, OW = H // 2, W // 2
        out = torch.empty((B, C, OH, OW), device=x.device, dtype=x.dtype)
        _maxpool2x2[(B * C, triton.cdiv(OH * OW, 128))](x, out, H, W, OH, OW, BLOCK=128)
        return out
