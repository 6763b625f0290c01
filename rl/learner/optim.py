"""AdamW and the learning-rate schedule (constant or cosine, both with linear warm-up)."""

from __future__ import annotations

import math
from typing import Iterable

import torch

from rl.learner.config import OptimizerSettings


def lr_factor(step: int, s: OptimizerSettings) -> float:
    """Multiplier of the base lr for optimizer step `step` (0-based: the factor the step is taken with).

    Warm-up: (step + 1) / warmup_steps, so the first step already moves and step warmup_steps - 1
    reaches the full lr. Cosine: from 1 at the end of warm-up to min_lr_ratio at total_steps, then flat.
    """
    if step < s.warmup_steps:
        return (step + 1) / s.warmup_steps
    if s.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - s.warmup_steps) / (s.total_steps - s.warmup_steps))
    return s.min_lr_ratio + (1.0 - s.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_optimizer(params: Iterable[torch.nn.Parameter], s: OptimizerSettings, device: torch.device):
    params = list(params)
    if not params:
        raise ValueError("the policy has no trainable parameters")
    # fused AdamW is one kernel per step on CUDA; on CPU the default (foreach) implementation is used.
    optimizer = torch.optim.AdamW(
        params, lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay, fused=device.type == "cuda" or None
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, s))
    return optimizer, scheduler
