# problem: tp_matmul_bias_sigmoid
# expect: correct
# why: persistent: one program per SM strides over GROUP_M-swizzled 128x64 tiles; ieee tl.dot, exp2 sigmoid epilogue
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _persistent_gemm_sigmoid(
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
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    LOG2E: tl.constexpr = 1.4426950408889634
    for tile in range(pid, tiles_m * tiles_n, nprog):
        group = tile // per_group
        first_m = group * GROUP_M
        group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
        tm = first_m + (tile % per_group) % group_rows
        tn = (tile % per_group) // group_rows
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        m_ok = rm < M
        n_ok = rn < N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            rk = k0 + tl.arange(0, BK)
            k_ok = rk < K
            a = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(w_ptr + rk[:, None] * swk + rn[None, :] * swn, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
        z = acc + tl.load(b_ptr + rn, mask=n_ok, other=0.0)[None, :]
        out = 1.0 / (1.0 + tl.exp2(-z * LOG2E))
        tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, out, mask=m_ok[:, None] & n_ok[None, :])


def _num_programs(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


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
        tiles = triton.cdiv(M, 128) * triton.cdiv(N, 64)
        grid = (min(tiles, _num_programs(x.device)),)
        _persistent_gemm_sigmoid[grid](
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
            BM=128,
            BN=64,
            BK=32,
            GROUP_M=8,
            num_warps=8,
        )
        return y
