"""What the worker's phases share (envs/worker/evaluation.py and its phases correctness.py, timing_phase.py)."""

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


def move_to_fresh_placement(placed: dict[str, Any], inputs: list[Any]) -> None:
    """New copies of `inputs` for the candidate (`placed["inputs"]`) and the anchor (`placed["anchor"]`), each
    allocated while the copy it replaces is still alive: the caching allocator hands a freed block to the next
    request of its size, so dropping the old copies first gave every later placement block the same address
    (H200 probe, 2026-12-01). Peak: the originals plus three copies."""
    placed["inputs"] = clone_args(inputs)  # the previous candidate copy (or the originals) still held meanwhile
    placed["anchor"] = clone_args(inputs)
