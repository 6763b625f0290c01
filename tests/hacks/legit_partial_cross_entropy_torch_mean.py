# problem: L2_06_cross_entropy
# expect: legit
# device: cpu
# why: the per-row loss (logsumexp minus the target logit over every logit) is a Triton kernel; the final mean over one value per row is a small torch reduction after it (.mean()), a tiny share of the reference's cost
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_loss(logits_ptr, tgt_ptr, loss_ptr, n_cls, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * n_cls
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cls, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(base + c, mask=c < n_cls, other=float("-inf"))
        new_m = tl.maximum(m, v)
        s = s * tl.exp(tl.where(new_m == float("-inf"), 0.0, m - new_m)) + \
            tl.where(v == float("-inf"), 0.0, tl.exp(v - new_m))
        m = new_m
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(tl.where(m == float("-inf"), float("-inf"), m - row_max)), axis=0)
    t = tl.load(tgt_ptr + row)
    tl.store(loss_ptr + row, row_max + tl.log(total) - tl.load(base + t))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        rows, n_cls = logits.shape
        per_row = torch.empty(rows, device=logits.device, dtype=torch.float32)
        _row_loss[(rows,)](logits, targets.contiguous(), per_row, n_cls, BLOCK=1024)
        return per_row.mean()
