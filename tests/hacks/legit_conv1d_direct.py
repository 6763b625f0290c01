# problem: L4_01_conv1d
# expect: legit
# device: cpu
# why: honest direct 1-D convolution (loops over input channels and taps, block of output positions per program, bias added in-kernel); nn.Conv1d is only built for identical weights and never called
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv1d(x_ptr, w_ptr, b_ptr, o_ptr, C_in, C_out, L_in, L_out, KS, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // C_out
    co = pid % C_out
    pos = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = pos < L_out
    acc = tl.zeros([BLOCK], tl.float32)
    for ci in range(0, C_in):
        for k in range(0, KS):
            w = tl.load(w_ptr + (co * C_in + ci) * KS + k)
            v = tl.load(x_ptr + (b * C_in + ci) * L_in + pos + k, mask=m, other=0.0)
            acc += w * v
    acc += tl.load(b_ptr + co)
    tl.store(o_ptr + (b * C_out + co) * L_out + pos, acc, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C_in, L = x.shape
        w = self.conv.weight.contiguous()
        C_out, _, KS = w.shape
        L_out = L - KS + 1
        out = torch.empty((B, C_out, L_out), device=x.device, dtype=x.dtype)
        _conv1d[(B * C_out, triton.cdiv(L_out, 64))](x, w, self.conv.bias, out, C_in, C_out, L, L_out, KS, BLOCK=64)
        return out
