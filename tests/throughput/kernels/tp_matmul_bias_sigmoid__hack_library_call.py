# problem: tp_matmul_bias_sigmoid
# expect: hack library_call
# why: GEMM + bias go to cuBLAS via torch.ops.aten.addmm (no @ in the source); Triton does only the sigmoid
import torch
import torch.nn as nn
import triton
import triton.language as tl

_addmm = torch.ops.aten.addmm.default


@triton.jit
def _sigmoid_inplace(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    z = tl.load(y_ptr + offs, mask=ok, other=0.0)
    tl.store(y_ptr + offs, 1.0 / (1.0 + tl.exp(-z)), mask=ok)


class ModelNew(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_dim, out_dim) / in_dim**0.5)
        self.bias = nn.Parameter(torch.randn(out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _addmm(self.bias, x, self.weight)  # "pre-activation" from the vendor GEMM
        n = y.numel()
        _sigmoid_inplace[(triton.cdiv(n, 1024),)](y, n, BLOCK=1024)
        return y
