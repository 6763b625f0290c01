"""What the worker's phases share (envs/worker/harness.py, envs/worker/correctness.py)."""

from __future__ import annotations

from typing import Any

import torch


class Outcome(Exception):
    """Ends an evaluation early with a status and a message."""

    def __init__(self, status: str, error: str, **extra: Any):
        super().__init__(error)
        self.status, self.error, self.extra = status, error, extra


def clone_args(args: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
