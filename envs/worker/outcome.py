"""What the worker's phases share (envs/worker/evaluation.py and its phases correctness.py, timing_phase.py)."""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import torch


class Outcome(Exception):
    """Ends an evaluation early with a status and a message."""

    def __init__(self, status: str, error: str, **extra: Any):
        super().__init__(error)
        self.status, self.error, self.extra = status, error, extra


def load_module(name: str, path: str) -> types.ModuleType:
    """Import the Python file `path` as module `name` (a problem or a solution file)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def clone_args(args: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def move_to_fresh_placement(placed: dict[str, Any], inputs: list[Any], spacer_bytes: int = 0) -> None:
    """New copies of `inputs` for the candidate (`placed["inputs"]`) and the anchor (`placed["anchor"]`), each
    allocated while the copy it replaces is still alive: the caching allocator hands a freed block to the next
    request of its size, so dropping the old copies first gave every later placement block the same address
    (H200 probe, 2026-12-01). Peak: the originals plus three copies.

    On a GPU the copies also come from fresh device memory: the allocator's cached free segments are released
    first (torch.cuda.empty_cache), and a `spacer_bytes` allocation taken before the copies shifts where the new
    segments land. A copy carved out of a cached segment keeps the physical memory of an earlier tensor, and
    on the H200 moving inputs that way changed a memory-bound kernel's time by 0.5% over 8 windows, while
    freeing and re-allocating them did by 6.1%: the spread that separates evaluations in fresh processes
    (docs/gpu-notes.md, session 7). Each block then samples a physical placement, as each evaluation does."""
    device = next((a.device for a in inputs if isinstance(a, torch.Tensor) and a.is_cuda), None)
    spacer = None
    if device is not None:
        torch.cuda.empty_cache()
        if spacer_bytes > 0:
            spacer = torch.empty(spacer_bytes, dtype=torch.uint8, device=device)
    placed["inputs"] = clone_args(inputs)  # the previous candidate copy (or the originals) still held meanwhile
    placed["anchor"] = clone_args(inputs)
    del spacer
