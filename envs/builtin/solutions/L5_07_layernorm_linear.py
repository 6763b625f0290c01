"""Triton LayerNorm statistics kernel, then a GEMM that normalises its A tiles on load (x_hat is never stored)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_stats_kernel(x_ptr, mean_ptr, rstd_ptr, K, eps, BLOCK_K: tl.constexpr):
    # Mean and 1/std (biased variance, like nn.LayerNorm) of one row held in registers.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_K)
    ok = offs < K
    x = tl.load(x_ptr + row.to(tl.int64) * K + offs, mask=ok, other=0.0)
    mean = tl.sum(x, axis=0) / K
    d = tl.where(ok, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / K
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _ln_linear_kernel(x_ptr, mean_ptr, rstd_ptr, g_ptr, be_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # y = ((x - mean) * rstd * g + be) @ W.T + b, W (N, K) as stored by nn.Linear.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    mean = tl.load(mean_ptr + offs_m, mask=m_ok, other=0.0)
    rstd = tl.load(rstd_ptr + offs_m, mask=m_ok, other=0.0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        k_ok = kk < K
        x = tl.load(x_ptr + offs_m[:, None] * K + kk[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptr + kk, mask=k_ok, other=0.0)
        be = tl.load(be_ptr + kk, mask=k_ok, other=0.0)
        # Columns past K give exactly 0 (g = be = 0); rows past M are garbage but never stored.
        a = (x - mean[:, None]) * rstd[:, None] * g[None, :] + be[None, :]
        w = tl.load(w_ptr + offs_n[None, :] * K + kk[:, None],
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    y = acc + tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], y,
             mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, hidden_features: int, out_features: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_features)
        self.linear = nn.Linear(hidden_features, out_features)
        # Same random draws, in the same order, as Model.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(hidden_features))
            self.norm.bias.copy_(0.5 * torch.randn(hidden_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        mean = torch.empty((M,), device=x.device, dtype=torch.float32)
        rstd = torch.empty((M,), device=x.device, dtype=torch.float32)
        _row_stats_kernel[(M,)](x, mean, rstd, K, self.norm.eps,
                                BLOCK_K=triton.next_power_of_2(K), num_warps=8)
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 64, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _ln_linear_kernel[grid](x, mean, rstd, self.norm.weight, self.norm.bias, w, self.linear.bias,
                                y, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                num_warps=4, num_stages=3)
        return y
