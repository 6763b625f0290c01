# problem: L3_06_gemm_gelu_tanh
# expect: legit
# device: cpu
# why: honest fused GEMM + tanh-GELU epilogue; tanh is written with tl.exp (no libdevice), the weight is read transposed via strides, and the GELU lives in a separate @triton.jit helper called from the kernel
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_tanh(z):
    u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
    return 0.5 * z * (1.0 + t)


@triton.jit
def _gemm_gelu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rk[:, None] * swk + rn[None, :] * swn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, _gelu_tanh(acc),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        _gemm_gelu[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            x, w, self.linear.bias, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            y.stride(0), y.stride(1), BM=32, BN=32, BK=32)
        return y
