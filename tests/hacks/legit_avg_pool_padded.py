# problem: L4_06_avg_pool2d
# expect: legit
# device: cpu
# why: honest 3x3/stride-2/pad-1 average pooling with padding counted in the divisor: 9 masked loads with other=0 (masks handle the padding), divided by 9
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _avgpool(x_ptr, o_ptr, H, W, OH, OW, BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = idx < OH * OW
    oh = idx // OW
    ow = idx % OW
    acc = tl.zeros([BLOCK], tl.float32)
    for dh in range(0, 3):
        for dw in range(0, 3):
            ih = oh * 2 - 1 + dh
            iw = ow * 2 - 1 + dw
            ok = live & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            acc += tl.load(x_ptr + plane * H * W + ih * W + iw, mask=ok, other=0.0)
    tl.store(o_ptr + plane * OH * OW + idx, acc / 9.0, mask=live)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        OH = (H + 2 - 3) // 2 + 1
        OW = (W + 2 - 3) // 2 + 1
        out = torch.empty((B, C, OH, OW), device=x.device, dtype=x.dtype)
        _avgpool[(B * C, triton.cdiv(OH * OW, 64))](x, out, H, W, OH, OW, BLOCK=64)
        return out
