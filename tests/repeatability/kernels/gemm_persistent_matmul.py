# problem: L3_01_matmul
# class: gemm_persistent
# why: a fixed grid of <= 132 programs (one per H200 SM) striding over the output tiles
import torch
import torch.nn as nn
import triton
import triton.language as tl

_MAX_PROGRAMS = 132


@triton.jit
def _mm_persistent(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    rk = tl.arange(0, BK)
    for tile in range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0)):
        # column-major tile order: consecutive programs share the same B column strip
        tm = tile % tiles_m
        tn = tile // tiles_m
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                        other=0.0)
            b = tl.load(b_ptr + kk[:, None] * s_bk + rn[None, :] * s_bn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                        other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=torch.float32, device=A.device)
        bm, bn, bk = 128, 64, 32
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        _mm_persistent[(min(tiles, _MAX_PROGRAMS),)](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0),
                                                     B.stride(1), C.stride(0), C.stride(1), BM=bm, BN=bn, BK=bk,
                                                     num_warps=4, num_stages=3)
        return C
