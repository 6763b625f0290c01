# problem: L1_07_mean_dim1
# expect: legit
# device: cpu
# why: honest mean over the middle dimension with .to(torch.float32) conversions around the kernel (input upcast, output cast back to the input dtype); the conversions are not compute
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mean_mid(x_ptr, o_ptr, R, C, BLOCK_C: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = c < C
    acc = tl.zeros([BLOCK_C], tl.float32)
    for r in range(0, R):
        acc += tl.load(x_ptr + (b * R + r) * C + c, mask=m, other=0.0)
    tl.store(o_ptr + b * C + c, acc / R, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        xf = x.to(torch.float32).contiguous()
        B, R, C = xf.shape
        out = torch.empty((B, C), device=x.device, dtype=torch.float32)
        _mean_mid[(B, triton.cdiv(C, 128))](xf, out, R, C, BLOCK_C=128)
        return out.to(in_dtype)
