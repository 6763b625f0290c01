# problem: L2_06_cross_entropy
# class: atomic
# why: per row: online logsumexp minus the target logit, then tl.atomic_add of loss / batch into a scalar
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ce_row_atomic(z_ptr, tgt_ptr, out_ptr, n_cls, stride, inv_batch, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = z_ptr + row * stride
    lane = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cls, BLOCK):
        v = tl.load(base + c0 + lane, mask=c0 + lane < n_cls, other=float("-inf"))
        new_max = tl.maximum(run_max, v)
        ref = tl.where(new_max == float("-inf"), 0.0, new_max)
        run_sum = run_sum * tl.exp(run_max - ref) + tl.exp(v - ref)
        run_max = new_max
    top = tl.max(run_max, axis=0)
    lse = top + tl.log(tl.sum(run_sum * tl.exp(run_max - top), axis=0))
    t = tl.load(tgt_ptr + row)
    picked = tl.load(base + t)
    tl.atomic_add(out_ptr, (lse - picked) * inv_batch)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        targets = targets.contiguous()
        batch, n_cls = logits.shape
        out = torch.zeros((), dtype=torch.float32, device=logits.device)
        _ce_row_atomic[(batch,)](logits, targets, out, n_cls, logits.stride(0), 1.0 / batch, BLOCK=2048,
                                 num_warps=8)
        return out
