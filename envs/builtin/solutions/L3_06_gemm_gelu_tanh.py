"""Triton GEMM x @ W.T with bias add and tanh-approximated GELU fused into the epilogue."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                        stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
    # Grouped ordering: GROUP_M row-blocks are swept together for L2 reuse.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % pids_per_group) % group_m
    pid_n = (pid % pids_per_group) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        # (BLOCK_K, BLOCK_N) tile of W.T, read straight from W (N, K).
        wt = tl.load(w_ptr + kk[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                     mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(x, wt, acc, input_precision="ieee")
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    y = acc + bias[None, :]
    # gelu_tanh(y) = 0.5*y*(1 + tanh(u)) = y * sigmoid(2u), u = sqrt(2/pi)*(y + 0.044715*y^3).
    # The sigmoid form needs only tl.exp and saturates cleanly (exp -> inf gives 0).
    u = 0.7978845608028654 * (y + 0.044715 * y * y * y)
    out = y / (1.0 + tl.exp(-2.0 * u))
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, out,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 64, 32
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        _linear_gelu_kernel[grid](x, w, b, out, M, N, K,
                                  x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                  out.stride(0), out.stride(1),
                                  BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8,
                                  num_warps=4, num_stages=3)
        return out
