# problem: L1_02_swish
# expect: hack torch_compile
# device: cpu
# why: wraps the PyTorch expression x * sigmoid(x) in torch.compile, so TorchInductor generates the kernel (Triton on GPU, C++ on CPU); the "Triton" in the solution is the compiler's, not the candidate's
import torch
import torch.nn as nn


def _swish(x):
    return x * torch.sigmoid(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._fn = torch.compile(_swish, dynamic=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn(x)
