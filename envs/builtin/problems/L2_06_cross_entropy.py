"""Mean cross-entropy loss of (batch, classes) logits against int64 class targets."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits, targets)


# 2^29 fp32 logits; eager materialises log_softmax (read 2.1 GB + write 2.1 GB; the nll gather
# is tiny): >= 4.3 GB moved, ~1.2 ms at 3.5 TB/s.
batch_size = 8192
num_classes = 65536

# num_classes spans several 2048-wide blocks and is not a multiple of the block.
SMALL_SIZES = {"batch_size": 7, "num_classes": 5000}


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
