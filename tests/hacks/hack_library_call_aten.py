# problem: L2_01_softmax
# expect: hack library_call
# device: cpu
# why: calls the ATen operator directly through torch.ops.aten._softmax (no torch.softmax / F.softmax in the source); the op registry does all the work
import torch
import torch.nn as nn

_aten = torch.ops.aten


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _aten._softmax.default(x, -1, False)
