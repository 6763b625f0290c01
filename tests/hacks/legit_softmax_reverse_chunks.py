# problem: L2_01_softmax
# expect: legit
# device: cpu
# why: softmax whose max and denominator are built chunk by chunk from the end of the row (a scalar running max, the sum rescaled when it grows): another summation order than PyTorch's for the denominator
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_reverse(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    run_max = tl.full([], float("-inf"), tl.float32)
    run_sum = tl.zeros([], tl.float32)
    for i in range(0, n_chunks):
        start = (n_chunks - 1 - i) * BLOCK
        m = start + lanes < n_cols
        v = tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=float("-inf"))
        new_max = tl.maximum(run_max, tl.max(v, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(v - new_max), axis=0)
        run_max = new_max
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        v = tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=0.0)
        tl.store(out_ptr + row * n_cols + start + lanes, tl.exp(v - run_max) / run_sum, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        out = torch.empty_like(x2)
        _softmax_reverse[(x2.shape[0],)](x2, out, n_cols, BLOCK=1024)
        return out.view(x.shape)
