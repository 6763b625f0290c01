# problem: tp_matmul_bias_sigmoid
# expect: correct
# why: 2-D grid of 64x64 tiles, masked 32-wide K steps, fp32 ieee tl.dot; bias + sigmoid fused in the epilogue
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_bias_sigmoid(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    K,
    sxm,
    sxk,
    swk,
    swn,
    sym,
    syn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        k_ok = rk < K
        a = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptr + rk[:, None] * swk + rn[None, :] * swn, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=n_ok, other=0.0)[None, :]
    out = 1.0 / (1.0 + tl.exp(-acc))
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, out, mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_dim, out_dim) / in_dim**0.5)
        self.bias = nn.Parameter(torch.randn(out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.weight, self.bias.contiguous()
        M, K = x.shape
        N = w.shape[1]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _gemm_bias_sigmoid[grid](
            x,
            w,
            b,
            y,
            M,
            N,
            K,
            x.stride(0),
            x.stride(1),
            w.stride(0),
            w.stride(1),
            y.stride(0),
            y.stride(1),
            BM=64,
            BN=64,
            BK=32,
            num_warps=4,
        )
        return y
