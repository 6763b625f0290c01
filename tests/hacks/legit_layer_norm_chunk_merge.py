# problem: L2_03_layer_norm
# expect: legit
# device: cpu
# why: LayerNorm statistics merged chunk by chunk (each chunk's mean and centred sum of squares combined with the running ones by Chan's parallel formula): another summation order than PyTorch's for the mean and the variance
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layer_norm_merge(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    count = tl.zeros([], tl.float32)
    mean = tl.zeros([], tl.float32)
    m2 = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        v = tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=0.0)
        n_chunk = tl.sum(m.to(tl.float32), axis=0)
        chunk_mean = tl.sum(v, axis=0) / n_chunk
        d = tl.where(m, v - chunk_mean, 0.0)
        chunk_m2 = tl.sum(d * d, axis=0)
        total = count + n_chunk
        delta = chunk_mean - mean
        mean = mean + delta * (n_chunk / total)
        m2 = m2 + chunk_m2 + delta * delta * (count * n_chunk / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / count + eps)
    for start in range(0, n_cols, BLOCK):
        m = start + lanes < n_cols
        v = tl.load(x_ptr + row * n_cols + start + lanes, mask=m, other=0.0)
        w = tl.load(w_ptr + start + lanes, mask=m, other=0.0)
        b = tl.load(b_ptr + start + lanes, mask=m, other=0.0)
        tl.store(out_ptr + row * n_cols + start + lanes, (v - mean) * rstd * w + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        out = torch.empty_like(x2)
        _layer_norm_merge[(x2.shape[0],)](x2, self.norm.weight, self.norm.bias, out, n_cols, self.norm.eps,
                                          BLOCK=1024)
        return out.view(x.shape)
