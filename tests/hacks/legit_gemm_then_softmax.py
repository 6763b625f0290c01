# problem: L5_03_gemm_softmax
# expect: legit
# device: cpu
# why: two different kernels in sequence: a tiled GEMM+bias writes the logits into an intermediate buffer, then a row-softmax kernel reads it and writes the output; the intermediate is scratch, not the return value
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_bias(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk,
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
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _softmax_row(z_ptr, o_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < N
    z = tl.load(z_ptr + row * N + c, mask=m, other=float("-inf"))
    e = tl.exp(z - tl.max(z, axis=0))
    e = tl.where(m, e, 0.0)
    tl.store(o_ptr + row * N + c, e / tl.sum(e, axis=0), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        M, K = x.shape
        N = w.shape[0]
        logits = torch.empty((M, N), device=x.device, dtype=torch.float32)
        _gemm_bias[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            x, w, self.linear.bias, logits, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            BM=32, BN=32, BK=32)
        out = torch.empty_like(logits)
        _softmax_row[(M,)](logits, out, N, BLOCK=triton.next_power_of_2(N))
        return out
