# problem: L3_03_matmul_transposed_b
# expect: legit
# device: cpu
# why: honest tiled GEMM computing A @ B.T by swapping B's strides at the call (no transpose copy); the docstring mentions torch.matmul and `A @ B.T`
"""C = A @ B.T without torch.matmul: B (N, K) is read as a (K, N) matrix through its strides."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BN)
    pm = pid // n_tiles_n
    pn = pid % n_tiles_n
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        N = B.shape[0]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 64),)
        # B.T has strides (B.stride(1), B.stride(0))
        _gemm[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(1), B.stride(0),
                    C.stride(0), C.stride(1), BM=32, BN=64, BK=32)
        return C
