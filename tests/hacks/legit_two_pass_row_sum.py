# problem: L1_05_row_sum
# expect: legit
# device: cpu
# why: two-pass reduction: the first kernel writes one partial sum per (row, chunk) into a scratch buffer, the second kernel sums each row's partials; the scratch buffer is not the returned tensor
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partials(x_ptr, part_ptr, n_cols, n_chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=0.0)
    tl.store(part_ptr + row * n_chunks + chunk, tl.sum(v, axis=0))


@triton.jit
def _finish(part_ptr, out_ptr, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_chunks, BLOCK):
        i = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + row * n_chunks + i, mask=i < n_chunks, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        CHUNK = 512
        n_chunks = triton.cdiv(cols, CHUNK)
        partial = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
        _partials[(rows, n_chunks)](x, partial, cols, n_chunks, CHUNK=CHUNK)
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        _finish[(rows,)](partial, out, n_chunks, BLOCK=16)
        return out
