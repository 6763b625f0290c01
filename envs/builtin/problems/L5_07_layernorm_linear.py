"""Pre-norm projection: nn.Linear(nn.LayerNorm(hidden)(x)) over the last dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_features: int, out_features: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_features)
        self.linear = nn.Linear(hidden_features, out_features)
        # Non-trivial LayerNorm affine parameters (the defaults are weight=1, bias=0).
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(hidden_features))
            self.norm.bias.copy_(0.5 * torch.randn(hidden_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x))


# 2*batch*hidden*out = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32); LayerNorm moves ~0.13 GB.
batch_size = 8192
hidden_features = 2048
out_features = 3072

SMALL_SIZES = {"batch_size": 100, "hidden_features": 200, "out_features": 150}


def get_inputs():
    # Non-zero mean and non-unit scale so the normalisation actually matters.
    return [2.0 * torch.randn(batch_size, hidden_features) + 1.0]


def get_init_inputs():
    return [hidden_features, out_features]
