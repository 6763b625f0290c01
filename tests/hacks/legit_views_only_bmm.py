# problem: L3_02_batched_matmul
# expect: legit
# device: cpu
# why: torch is used only for allocation and views (reshape, permute, contiguous, empty): B is read through a permuted view's strides and the output is allocated flat and reshaped; the batched GEMM itself is a Triton tl.dot kernel (ieee precision)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bmm(a_ptr, bt_ptr, c_ptr, M, N, K,
         sab, sam, sak, sbb, sbn, sbk, scb, scm, scn,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    bid = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + bid * sab + rm[:, None] * sam + rk[None, :] * sak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        # bt is B viewed as (batch, N, K); read it back as a (K, N) tile
        b = tl.load(bt_ptr + bid * sbb + rk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + bid * scb + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        batch, M, K = A.shape
        N = B.shape[2]
        Bt = B.permute(0, 2, 1)  # a view: (batch, N, K)
        flat = torch.empty(batch * M * N, device=A.device, dtype=torch.float32)
        C = flat.reshape(batch, M, N)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32), batch)
        _bmm[grid](A, Bt, C, M, N, K,
                   A.stride(0), A.stride(1), A.stride(2),
                   Bt.stride(0), Bt.stride(1), Bt.stride(2),
                   C.stride(0), C.stride(1), C.stride(2),
                   BM=32, BN=32, BK=32)
        return C
