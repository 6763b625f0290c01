"""GPU timing with CUDA events: warm-up, then timed runs each preceded by an L2 flush.

Runs inside the worker while it holds the GPU exclusively. The end event is recorded on the calling
stream right after the call returns, the same way for baselines and candidates; then a device-wide
synchronize, so work left on any stream is finished before the next run starts. Work on other streams
is therefore not in the events: the harness refuses it (launch streams, host-clock tail check).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer twice the size of the L2 cache; zeroing it evicts whatever the last run left there."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20) or (64 << 20)
    return torch.empty(2 * l2, dtype=torch.uint8, device=device)


def time_cuda(fn: Callable[[], Any], runs: int = 100, warmup_ms: float = 25.0, max_warmup_runs: int = 50,
              keep: tuple[int, ...] = ()) -> tuple[list[float], dict[int, Any]]:
    """Per-run times in ms of `fn` measured with CUDA events, and the outputs of the timed runs in `keep`."""
    device = torch.device("cuda", torch.cuda.current_device())
    flush = flush_buffer(device)
    # Warm-up: at least 3 runs and about `warmup_ms` of work (JIT compiles, autotuning, allocator growth).
    start = time.perf_counter()
    n = 0
    while n < 3 or (n < max_warmup_runs and (time.perf_counter() - start) * 1e3 < warmup_ms):
        fn()
        torch.cuda.synchronize()
        n += 1
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    kept: dict[int, Any] = {}
    for i, (begin, end) in enumerate(events):
        flush.zero_()
        torch.cuda.synchronize()
        begin.record()
        out = fn()
        end.record()
        torch.cuda.synchronize()
        if i in keep:
            kept[i] = out
    return [begin.elapsed_time(end) for begin, end in events], kept


def host_tail_ms(fn: Callable[[], Any], runs: int = 10) -> tuple[float, float]:
    """Least host-clock time from `fn` returning to a full device synchronization finishing (the device
    work on every stream still running when the call returned), and the same for a one-element kernel
    as a control: the platform's own launch-to-sync latency, which can reach a millisecond in a VM.
    Host-side overhead (Python, launches) happens before the return, so it cannot inflate the tail;
    alternating the two and keeping the minimum drops scheduling noise."""
    tick = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
    tails: list[float] = []
    controls: list[float] = []
    for _ in range(runs):
        for work, samples in ((fn, tails), (tick.zero_, controls)):
            torch.cuda.synchronize()
            work()
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3)
    return min(tails), min(controls)
