"""Triton GroupNorm: one program per (sample, group) computes mean/variance, then normalizes with the affine params."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, C, HW, G, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)  # n * G + g; a group is one contiguous run of (C // G) * HW floats
    g = pid % G
    cpg = C // G
    group_size = cpg * HW
    base = pid.to(tl.int64) * group_size
    lanes = tl.arange(0, BLOCK)

    # Pass 1: exact mean / sum of squared deviations per block, merged across blocks with
    # Chan's parallel update (avoids the cancellation of E[x^2] - E[x]^2).
    mean = 0.0
    m2 = 0.0
    count = 0.0
    for start in range(0, group_size, BLOCK):
        offs = start + lanes
        mask = offs < group_size
        v = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        n_blk = tl.minimum(group_size - start, BLOCK).to(tl.float32)
        mean_blk = tl.sum(v, axis=0) / n_blk
        d = tl.where(mask, v - mean_blk, 0.0)
        m2_blk = tl.sum(d * d, axis=0)
        delta = mean_blk - mean
        total = count + n_blk
        mean = mean + delta * (n_blk / total)
        m2 = m2 + m2_blk + delta * delta * (count * n_blk / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / count + eps)

    # Pass 2: normalize and apply the per-channel affine transform.
    for start in range(0, group_size, BLOCK):
        offs = start + lanes
        mask = offs < group_size
        v = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        c = g * cpg + offs // HW
        w = tl.load(w_ptr + c, mask=mask, other=0.0)
        b = tl.load(b_ptr + c, mask=mask, other=0.0)
        tl.store(out_ptr + base + offs, (v - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels)
        nn.init.normal_(self.gn.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.gn.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c = x.shape[0], x.shape[1]
        hw = x.numel() // (n * c)
        g = self.gn.num_groups
        out = torch.empty_like(x)
        group_norm_kernel[(n * g,)](x, self.gn.weight, self.gn.bias, out, c, hw, g, self.gn.eps,
                                    BLOCK=4096, num_warps=8)
        return out
