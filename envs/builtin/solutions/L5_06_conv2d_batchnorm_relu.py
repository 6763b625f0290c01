"""Triton implicit-GEMM 'same' Conv2d with conv bias, eval-mode BatchNorm and ReLU applied in the epilogue."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv_bn_relu_kernel(x_ptr, w_ptr, cb_ptr, mean_ptr, var_ptr, gamma_ptr, beta_ptr, out_ptr,
                         C_in, C_out, H, W, eps,
                         KS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                         BLOCK_CI: tl.constexpr):
    # One program: BLOCK_P output pixels (flattened h*W+w) x BLOCK_CO output channels of one image,
    # reduced over (in-channel block, kernel tap). Stride 1, padding KS//2, so out is H x W.
    pid_p = tl.program_id(0)
    pid_co = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    PAD: tl.constexpr = KS // 2
    HW = H * W
    p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    co = pid_co * BLOCK_CO + tl.arange(0, BLOCK_CO)
    p_ok = p < HW
    co_ok = co < C_out
    oh = p // W
    ow = p % W
    x_base = x_ptr + n * C_in * HW
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for ci0 in range(0, C_in, BLOCK_CI):
        ci = ci0 + tl.arange(0, BLOCK_CI)
        ci_ok = ci < C_in
        for kh in range(KS):
            ih = oh + kh - PAD
            h_ok = p_ok & (ih >= 0) & (ih < H)
            for kw in range(KS):
                iw = ow + kw - PAD
                pix_ok = h_ok & (iw >= 0) & (iw < W)  # zero padding via the mask
                a = tl.load(x_base + ci[None, :] * HW + (ih * W + iw)[:, None],
                            mask=pix_ok[:, None] & ci_ok[None, :], other=0.0)
                # weight (C_out, C_in, KS, KS): (BLOCK_CI, BLOCK_CO) slice at tap (kh, kw)
                b = tl.load(w_ptr + co[None, :] * (C_in * KS * KS) + ci[:, None] * (KS * KS)
                            + (kh * KS + kw),
                            mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
                acc = tl.dot(a, b, acc, input_precision="ieee")
    # Epilogue: conv bias, then BN with running stats, y = (z - mean) * gamma / sqrt(var + eps) + beta.
    cb = tl.load(cb_ptr + co, mask=co_ok, other=0.0)
    mean = tl.load(mean_ptr + co, mask=co_ok, other=0.0)
    var = tl.load(var_ptr + co, mask=co_ok, other=1.0)
    gamma = tl.load(gamma_ptr + co, mask=co_ok, other=0.0)
    beta = tl.load(beta_ptr + co, mask=co_ok, other=0.0)
    scale = gamma / tl.sqrt(var + eps)
    y = (acc + (cb - mean)[None, :]) * scale[None, :] + beta[None, :]
    y = tl.maximum(y, 0.0)
    tl.store(out_ptr + n * C_out * HW + co[None, :] * HW + p[:, None], y,
             mask=p_ok[:, None] & co_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        # Same random draws, in the same order, as Model.
        with torch.no_grad():
            self.bn.weight.copy_(torch.randn(out_channels))
            self.bn.bias.copy_(torch.randn(out_channels))
            self.bn.running_mean.copy_(0.2 * torch.randn(out_channels))
            self.bn.running_var.copy_(0.5 + torch.rand(out_channels))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        n, c_in, h, wd = x.shape
        c_out, _, ks, _ = w.shape
        out = torch.empty((n, c_out, h, wd), device=x.device, dtype=torch.float32)
        BLOCK_P, BLOCK_CO, BLOCK_CI = 128, 64, 32
        grid = (triton.cdiv(h * wd, BLOCK_P), triton.cdiv(c_out, BLOCK_CO), n)
        _conv_bn_relu_kernel[grid](x, w, self.conv.bias, self.bn.running_mean, self.bn.running_var,
                                   self.bn.weight, self.bn.bias, out, c_in, c_out, h, wd, self.bn.eps,
                                   KS=ks, BLOCK_P=BLOCK_P, BLOCK_CO=BLOCK_CO, BLOCK_CI=BLOCK_CI,
                                   num_warps=8)
        return out
