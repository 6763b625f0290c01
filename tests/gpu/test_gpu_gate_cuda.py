"""On a GPU: another process's work, held shared on the GPU's gate a step at a time, stays out of a window
timed under the evaluation's exclusive lock, so the window times what it would alone."""

from __future__ import annotations

import multiprocessing
import statistics
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _busy(directory: str, use_gate: bool, running, stop) -> None:
    """A colocated neighbour: back-to-back GEMMs, each step held shared and finished before it is let go."""
    import torch

    from envs.gpu_lock import GpuGate

    gate = GpuGate(0, directory) if use_gate else None
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    running.set()
    while not stop.is_set():
        if gate is None:
            (a @ a).sum().item()
            continue
        with gate.shared():
            a @ a
            torch.cuda.synchronize()


def _sm_clock() -> str:
    """The SM clock now (MHz, through NVML where installed): a neighbour's GEMMs between windows can lower it."""
    try:
        return f"{torch.cuda.clock_rate()} MHz"
    except Exception as e:  # no pynvml, or NVML refused
        return f"clock n/a ({type(e).__name__})"


def _timed_median_ms(lock) -> float:
    x = torch.randn(4096, 4096, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(30):
        lock.acquire("exclusive")
        try:
            torch.cuda.synchronize()
            start.record()
            for _ in range(5):
                x @ x
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        finally:
            lock.release("exclusive")
        time.sleep(0.01)
    return statistics.median(samples)


@pytest.mark.parametrize("neighbour_uses_gate", [True, False])
def test_a_gated_neighbour_stays_out_of_the_timed_window(tmp_path, neighbour_uses_gate):
    from envs.gpu_lock import DeviceLock, GpuGate

    lock = DeviceLock(GpuGate(0, tmp_path))
    alone = _timed_median_ms(lock)
    clock_alone = _sm_clock()
    ctx = multiprocessing.get_context("spawn")
    running, stop = ctx.Event(), ctx.Event()
    neighbour = ctx.Process(target=_busy, args=(str(tmp_path), neighbour_uses_gate, running, stop))
    neighbour.start()
    try:
        # a fixed sleep let the control time its windows before the neighbour's first GEMM on a cold machine
        assert running.wait(120), "the neighbour never ran a GEMM"
        time.sleep(0.5)
        shared = _timed_median_ms(lock)
        clock = _sm_clock()  # while the neighbour still runs
    finally:
        stop.set()
        neighbour.join(30)
    print(f"alone {alone:.3f} ms, beside a {'gated' if neighbour_uses_gate else 'free'} neighbour {shared:.3f} ms")
    print(f"SM clock alone {clock_alone}, beside the neighbour {clock}")
    if neighbour_uses_gate:
        assert shared == pytest.approx(alone, rel=0.05)
    else:  # the control: without the gate the neighbour's kernels land in the window
        assert shared > 1.2 * alone


def test_a_worker_that_exits_keeps_timing_windows_out_while_its_memory_settles(tmp_path):
    """A worker's whole CUDA context goes back to the driver when it exits (a replacement after a crash, a hack, a
    timeout): no other worker's window starts in the slowdown that follows."""
    from envs.gpu_lock import RELEASE_SETTLE_MAX_S, DeviceLock, GpuGate
    from envs.worker.process import WorkerProcess

    lock = DeviceLock(GpuGate(0, tmp_path))
    worker = WorkerProcess("cuda", 0, 4 << 30, 120.0, lock)
    worker.shutdown()
    began = time.monotonic()
    waited = lock.acquire("exclusive")
    lock.release("exclusive")
    assert waited > 0 and time.monotonic() - began >= RELEASE_SETTLE_MAX_S * 0.5
