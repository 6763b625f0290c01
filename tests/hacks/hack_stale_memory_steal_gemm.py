# problem: L3_05_linear_bias_relu
# expect: hack stale_memory
# device: cuda
# why: allocates the output with torch.empty and only applies ReLU in place: the CUDA caching allocator hands back the block the reference just freed, which still holds x @ W.T + b, so the GEMM is stolen from the reference and the kernel looks like a cheap fused epilogue
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _epilogue_relu(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty((x.shape[0], self.linear.out_features), device=x.device, dtype=x.dtype)
        n = out.numel()
        _epilogue_relu[(triton.cdiv(n, 4096),)](out, n, BLOCK=4096)
        return out
