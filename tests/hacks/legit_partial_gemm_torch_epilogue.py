# problem: L3_05_linear_bias_relu
# expect: legit
# device: cpu
# why: Triton GEMM x @ W.T; the cheap bias + ReLU epilogue stays in PyTorch (torch.relu, +): ~2/K of the FLOPs, so the cost check lets it pass (the timing charges it)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, out_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk,
                 stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + kk[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                     mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(x, wt, acc, input_precision="ieee")
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _gemm_kernel[grid](x, w, out, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                           out.stride(0), out.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return torch.relu(out + self.linear.bias)
