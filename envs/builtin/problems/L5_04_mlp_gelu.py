"""Two-layer MLP: Linear -> GELU (tanh approximation) -> Linear."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, hidden_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.fc1(x), approximate="tanh")
        return self.fc2(h)


# 2*batch*hidden*(in + out) = 1.03e11 FLOPs: ~2 ms at ~50 TFLOP/s (fp32, no TF32);
# the (batch, hidden) activation round trips (fc1 out, GELU in/out, fc2 in) add ~0.4 GB.
batch_size = 4096
in_features = 2048
hidden_features = 3072
out_features = 2048

SMALL_SIZES = {"batch_size": 100, "in_features": 90, "hidden_features": 150, "out_features": 70}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
