# problem: L0_07_elementwise_mul_add
# expect: hack torch_compile
# device: cpu
# why: reaches the compiler through getattr(torch, "comp" + "ile") with backend="aot_eager" applied to the forward method itself, so no literal torch.compile appears and the dynamo-traced PyTorch graph does the work
import torch
import torch.nn as nn

_jit = getattr(torch, "comp" + "ile")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.forward = _jit(self._graph, backend="aot_eager")

    def _graph(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x * y + z
