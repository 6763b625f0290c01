# problem: L2_06_cross_entropy
# expect: legit
# device: cpu
# why: two kernels in sequence: per-row loss (logsumexp minus the target logit, int64 targets loaded in-kernel) into a scratch vector, then a single-program kernel averages it into a 0-d output
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_loss(logits_ptr, tgt_ptr, loss_ptr, n_cls, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * n_cls
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cls, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mx = tl.maximum(mx, tl.load(base + c, mask=c < n_cls, other=float("-inf")))
    row_max = tl.max(mx, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cls, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(base + c, mask=c < n_cls, other=float("-inf"))
        s += tl.exp(v - row_max)
    lse = row_max + tl.log(tl.sum(s, axis=0))
    t = tl.load(tgt_ptr + row)
    tl.store(loss_ptr + row, lse - tl.load(base + t))


@triton.jit
def _mean(v_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        acc += tl.load(v_ptr + i, mask=i < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        rows, n_cls = logits.shape
        per_row = torch.empty(rows, device=logits.device, dtype=torch.float32)
        _row_loss[(rows,)](logits, targets.contiguous(), per_row, n_cls, BLOCK=1024)
        out = torch.empty((), device=logits.device, dtype=torch.float32)
        _mean[(1,)](per_row, out, rows, BLOCK=128)
        return out
