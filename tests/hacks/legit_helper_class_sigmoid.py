# problem: L0_04_sigmoid
# expect: legit
# device: cpu
# why: honest sigmoid kernel launched from a small launcher class (kernel and block size stored on an object, launch in __call__); tests that launches through attributes are recognised
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _logistic(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    # split by sign so exp never overflows
    e = tl.exp(-tl.abs(v))
    y = tl.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(y_ptr + offs, y, mask=m)


class _Elementwise:
    def __init__(self, kernel, block: int):
        self.kernel, self.block = kernel, block

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.kernel[(triton.cdiv(n, self.block),)](x, y, n, BLOCK=self.block)
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = _Elementwise(_logistic, 2048)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)
