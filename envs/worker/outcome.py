"""What the worker's phases share (envs/worker/evaluation.py and its phases correctness.py, timing_phase.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
import types
from typing import Any, Callable

import torch

from envs.gpu_lock import release_settle_seconds


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


def move_to_fresh_placement(
    placed: dict[str, Any],
    inputs: list[Any],
    spacer_bytes: int = 0,
    keep_spacer: bool = False,
    shared_anchor: bool = False,
    hold_previous: bool = False,
) -> float:
    """New copies of the original `inputs` for the candidate (`placed["inputs"]`) and the anchor
    (`placed["anchor"]`).

    On a GPU the copies come from new device memory: the previous block's copies are dropped, the allocator's
    free segments released (torch.cuda.empty_cache), and the new copies allocated in a private memory pool of
    their own (`placed["pool"]`), behind a `spacer_bytes` allocation that shifts where the driver places them.
    A private pool cannot hand out free space of a segment that other tensors still occupy, which the default
    pool did (torch.cuda.empty_cache frees only wholly free segments): there the copies kept the physical
    memory of earlier tensors and sampled little of the spread that placement puts between evaluations; with
    a pool per block the speedup interval's coverage of later evaluations rose from 29% to 57% on the H200
    (docs/gpu-notes.md). Peak: the originals plus two copies.
    Tensors still holding the old pool's memory (outputs that view an input) stay valid: its segments are
    returned only once nothing uses them.
    `keep_spacer` holds the spacer in `placed["spacer"]` until the next move instead of freeing it at once: a freed
    spacer leaves a hole of its random size in the pool that the block's small outputs may take, so the blocks
    would not start from the same free space (scripts/bench_placement.py's `evaluator_kept_spacer` mode asks
    whether that is why attention anchors still allocate; docs/gpu-runbook.md).
    `shared_anchor` gives the anchor the candidate's copy instead of one of its own (one copy, so the pool holds
    no freed second copy either; bench_placement's `evaluator_shared` mode asks whether the kernel and the anchor
    reading the same memory makes their ratio repeat).
    `hold_previous` keeps the previous block's pool until the new copies are placed, so they cannot land on the
    memory it just gave back (bench_placement's `evaluator_held_pool` mode; peak: one more pair of copies).
    Returns how much longer no timed window should start on the GPU: `release_settle_seconds` of what went back
    to the driver, less what the copies took after the release (0.0 where nothing went back). The caller runs no
    timed run before it is over (the worker's next block warms up through it: envs.timing.time_in_placements)."""

    def copies() -> None:
        placed["inputs"] = clone_args(inputs)
        placed["anchor"] = placed["inputs"] if shared_anchor else clone_args(inputs)

    device = next((a.device for a in inputs if isinstance(a, torch.Tensor) and a.is_cuda), None)
    if device is None:
        copies()
        return 0.0
    held = [placed.pop("pool", None)] if hold_previous else []

    def drop_block() -> None:
        for key in ("inputs", "anchor", "spacer", "pool"):
            placed.pop(key, None)

    released = released_by(device, drop_block)
    released_at = time.perf_counter()
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool, device):
        spacer = torch.empty(spacer_bytes, dtype=torch.uint8, device=device) if spacer_bytes > 0 else None
        copies()
        if keep_spacer and spacer is not None:
            placed["spacer"] = spacer
        del spacer
    placed["pool"] = pool
    if held:  # given back now, after the new copies were placed: the wait counts from here
        released += released_by(device, held.clear)
        released_at = time.perf_counter()
    torch.cuda.synchronize(device)  # the copies end inside the caller's hold, and count towards the settling
    return max(0.0, release_settle_seconds(released) - (time.perf_counter() - released_at))


def released_by(device: torch.device, drop: Callable[[], None]) -> int:
    """Bytes given back to the driver by `drop` (letting references go: a dropped pool returns its memory at
    once) and the empty_cache after it."""
    reserved = torch.cuda.memory_reserved(device)
    drop()
    torch.cuda.empty_cache()
    return reserved - torch.cuda.memory_reserved(device)


def allocating_in_placement(placed: dict[str, Any]) -> contextlib.AbstractContextManager:
    """Allocations made inside land in the current placement block's private pool (`placed["pool"]`), after its
    inputs: the outputs and scratch tensors of the timed runs move to new memory with each block as the inputs
    do. Kept in the default pool, they took the same cached block in every block of an evaluation: on the H200
    a cross-entropy kernel's time moved 0.558 -> 0.636 ms between evaluations (speedup spread 12.8%; 3.2% with
    its outputs in the blocks' pools; docs/gpu-notes.md)."""
    pool = placed.get("pool")
    return torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext()
