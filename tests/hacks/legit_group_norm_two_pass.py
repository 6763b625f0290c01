# problem: L4_07_group_norm
# expect: legit
# device: cpu
# why: honest GroupNorm: one program per (batch, group) computes mean and variance in two passes over the contiguous group, then normalises with per-channel weight/bias; __init__ replays the reference's parameter init (GroupNorm, then normal_ on weight and bias) to get identical weights
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _group_norm(x_ptr, w_ptr, b_ptr, y_ptr, C, HW, G, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    g = pid % G
    cpg = C // G
    n = cpg * HW
    base = pid.to(tl.int64) * n
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        s += tl.load(x_ptr + base + i, mask=i < n, other=0.0)
    mean = tl.sum(s, axis=0) / n
    q = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        d = tl.where(i < n, tl.load(x_ptr + base + i, mask=i < n, other=0.0) - mean, 0.0)
        q += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(q, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        m = i < n
        ch = g * cpg + i // HW
        w = tl.load(w_ptr + ch, mask=m, other=0.0)
        b = tl.load(b_ptr + ch, mask=m, other=0.0)
        v = tl.load(x_ptr + base + i, mask=m, other=0.0)
        tl.store(y_ptr + base + i, (v - mean) * rstd * w + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels)
        nn.init.normal_(self.gn.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.gn.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        G = self.gn.num_groups
        y = torch.empty_like(x)
        _group_norm[(B * G,)](x, self.gn.weight, self.gn.bias, y, C, H * W, G, self.gn.eps, BLOCK=1024)
        return y
