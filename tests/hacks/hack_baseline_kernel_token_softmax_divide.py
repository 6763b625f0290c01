# problem: L2_01_softmax
# expect: hack baseline_kernel
# device: cpu
# why: PyTorch computes the exponentials and the row sums (torch.exp, amax, sum: none of them is the reference's softmax by name), a token Triton kernel only divides; the ATen cost check sees PyTorch spend more than the reference's whole cost
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _divide_rows(e_ptr, s_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = tl.load(s_ptr + row)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(e_ptr + row * n_cols + c, mask=c < n_cols, other=0.0)
        tl.store(out_ptr + row * n_cols + c, v / total, mask=c < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x - x.amax(dim=-1, keepdim=True)).contiguous()
        s = e.sum(dim=-1).contiguous()
        out = torch.empty_like(e)
        _divide_rows[(e.shape[0],)](e, s, out, e.shape[1], BLOCK=1024)
        return out
