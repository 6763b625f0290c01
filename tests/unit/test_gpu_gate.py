"""GpuGate across real processes: a timing window (exclusive) never overlaps another process's step of GPU
work (shared), a waiting window lets at most the steps already started finish, and a holder that dies
leaves the gate free."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from envs.gpu_lock import DeviceLock, GpuGate

STEP_S = 0.05


def _reader(directory: str, log_path: str, stop_path: str) -> None:
    """Back-to-back steps of 'GPU work', each logged as (start, end) after it ends."""
    gate = GpuGate(0, directory)
    with open(log_path, "a") as log:
        while not os.path.exists(stop_path):
            with gate.shared():
                start = time.monotonic()
                time.sleep(STEP_S)
                end = time.monotonic()
            log.write(f"{start} {end}\n")
            log.flush()


@pytest.fixture()
def readers(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    stop = tmp_path / "stop"
    procs = [
        ctx.Process(target=_reader, args=(str(tmp_path), str(tmp_path / f"r{i}.log"), str(stop))) for i in range(2)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"r{i}.log").exists() and (tmp_path / f"r{i}.log").stat().st_size for i in range(2)):
        assert time.monotonic() < deadline, "the reader processes did not start"
        time.sleep(0.01)
    yield tmp_path, procs
    stop.touch()
    for p in procs:
        p.join(10)


def _steps(directory) -> list[tuple[float, float]]:
    return [
        tuple(map(float, line.split())) for i in range(2) for line in (directory / f"r{i}.log").read_text().splitlines()
    ]


def test_exclusive_windows_never_overlap_other_processes_steps(readers):
    directory, _ = readers
    lock = DeviceLock(GpuGate(0, directory))
    windows = []
    for _ in range(5):
        waited = lock.acquire("exclusive")
        start = time.monotonic()
        time.sleep(0.1)
        windows.append((start, time.monotonic()))
        lock.release("exclusive")
        assert waited < 2 * STEP_S + 0.5  # the steps already running finish; new ones queue behind the window
        time.sleep(0.05)
    time.sleep(0.2)
    steps = _steps(directory)
    assert len(steps) > 10
    overlapping = [(s, w) for s in steps for w in windows if s[0] < w[1] and w[0] < s[1]]
    assert not overlapping


def test_readers_run_together_and_a_dead_holder_frees_the_gate(tmp_path):
    gate, other = GpuGate("GPU-a/b", tmp_path), GpuGate("GPU-a/b", tmp_path)
    with gate.shared(), other.shared():  # shared holds coexist
        pass
    ctx = multiprocessing.get_context("spawn")
    holder = ctx.Process(target=_hold_forever, args=(str(tmp_path),))
    holder.start()
    time.sleep(1.0)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    assert gate.acquire_exclusive() < 5
    gate.release()


def _hold_forever(directory: str) -> None:
    with GpuGate("GPU-a/b", directory).shared():
        time.sleep(600)
