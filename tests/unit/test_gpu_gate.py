"""GpuGate across real processes: a timing window (exclusive) never overlaps another process's step of GPU
work (shared), a waiting window lets at most the steps already started finish, and a holder that dies
leaves the gate free."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
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


def _window(directory: str, out_path: str) -> None:
    """Another process's timing window: when it got the GPU, and when it let go."""
    lock = DeviceLock(GpuGate(0, directory))
    lock.acquire("exclusive")
    got = time.monotonic()
    time.sleep(0.05)
    ended = time.monotonic()
    lock.release("exclusive")
    with open(out_path, "w") as f:
        f.write(f"{got} {ended}")


def _start_window(directory) -> tuple[multiprocessing.Process, os.PathLike]:
    out = directory / "window"
    proc = multiprocessing.get_context("spawn").Process(target=_window, args=(str(directory), str(out)))
    proc.start()
    return proc, out


def test_a_correctness_hold_keeps_another_evaluators_window_out(tmp_path):
    lock = DeviceLock(GpuGate(0, tmp_path))
    lock.acquire("shared")  # one worker's correctness trial in this evaluator
    proc, out = _start_window(tmp_path)
    time.sleep(2.0)  # the other process has long started and is waiting
    assert not out.exists()
    let_go = time.monotonic()
    lock.release("shared")
    proc.join(30)
    got, _ = map(float, out.read_text().split())
    assert got >= let_go


def test_overlapping_correctness_holds_do_not_starve_another_evaluators_window(tmp_path):
    """Two workers whose trials overlap (the process never drops to zero holders) still let a waiting
    window in: each new trial queues behind it."""
    lock, stop = DeviceLock(GpuGate(0, tmp_path)), threading.Event()
    trials: list[tuple[float, float]] = []

    def worker() -> None:
        while not stop.is_set():
            lock.acquire("shared")
            start = time.monotonic()
            time.sleep(STEP_S)
            trials.append((start, time.monotonic()))
            lock.release("shared")

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(STEP_S / 2)  # staggered, so one of them is always in a trial
    proc, out = _start_window(tmp_path)
    proc.join(30)
    stop.set()
    for t in threads:
        t.join(10)
    got, ended = map(float, out.read_text().split())
    assert not [s for s in trials if s[0] < ended and got < s[1]]  # no trial inside the window
    assert [s for s in trials if s[0] > ended]  # and the workers went on after it


def test_a_quiet_period_keeps_exclusive_holds_out_and_lets_shared_ones_in(tmp_path):
    """Memory given back to the driver slows the GPU for a while: no timing window starts in that time, in this
    process or another one on the same GPU, while correctness work goes on."""
    lock = DeviceLock(GpuGate(0, tmp_path))
    other_process = DeviceLock(GpuGate(0, tmp_path))  # its own gate files' descriptors, as another evaluator's
    lock.quiet(0.3)
    began = time.monotonic()
    assert lock.acquire("shared") < 0.05  # shared work is not held back
    lock.release("shared")
    waited = other_process.acquire("exclusive")
    assert waited >= 0.25 and time.monotonic() - began >= 0.28
    other_process.release("exclusive")
    assert lock.acquire("exclusive") < 0.05  # over: the next window starts at once
    lock.release("exclusive")


def test_a_quiet_period_never_shortens_one_already_asked_for_and_a_stale_or_huge_one_is_bounded(tmp_path):
    from envs.gpu_lock import MAX_QUIET_S

    gate = GpuGate(0, tmp_path)
    lock = DeviceLock(gate)
    lock.quiet(0.4)
    lock.quiet(0.1)  # shorter: the longer one stands
    assert gate.quiet_end() - time.monotonic() > 0.3
    lock.quiet(3600)  # a request beyond the bound is cut to it
    assert gate.quiet_end() - time.monotonic() <= MAX_QUIET_S
    # an end far ahead of the host's clock (written before a reboot) is stale: no wait at all
    import struct

    with open(tmp_path / "kernelrl-gpu-0.quiet", "r+b") as f:
        f.write(struct.pack("d", time.monotonic() + 1e6))
    assert DeviceLock(GpuGate(0, tmp_path)).acquire("exclusive") < 0.05


def test_an_exclusive_hold_queued_when_a_quiet_period_starts_steps_aside_for_shared_holds(tmp_path):
    """A worker moving its inputs under a shared hold says how long its release needs to settle while another
    worker's window already queues: that window leaves the queue, other workers' correctness runs start in the
    meantime (with a writer queued they would wait), and the window starts after the period."""
    lock = DeviceLock(GpuGate(0, tmp_path))
    lock.acquire("shared")
    waits = []
    window = threading.Thread(target=lambda: waits.append(lock.acquire("exclusive")))
    window.start()
    time.sleep(0.05)  # the window queues behind the shared hold
    lock.quiet(0.3)
    lock.release("shared")
    began = time.monotonic()
    assert lock.acquire("shared") < 0.05  # a correctness trial gets the GPU during the quiet period
    lock.release("shared")
    window.join(5)
    assert waits and waits[0] >= 0.3 and time.monotonic() - began >= 0.25
    lock.release("exclusive")


def test_an_exclusive_hold_steps_aside_for_a_quiet_period_another_process_starts_while_it_queues(tmp_path):
    """Another evaluator on the same GPU gives memory back and lets go of its shared hold while this one's window
    queues on the host-wide gate: the window does not sit out the settling holding the GPU, so that evaluator's
    next correctness run starts at once, and the window starts after the period."""
    lock = DeviceLock(GpuGate(0, tmp_path))
    other_process = DeviceLock(GpuGate(0, tmp_path))
    other_process.acquire("shared")
    waits = []
    window = threading.Thread(target=lambda: waits.append(lock.acquire("exclusive")))
    window.start()
    time.sleep(0.05)  # the window queues on the gate behind the other process's trial
    other_process.quiet(0.3)
    other_process.release("shared")
    began = time.monotonic()
    time.sleep(0.02)  # the window has had the gate and seen the period
    trial_waits = []

    def trial():
        trial_waits.append(other_process.acquire("shared"))
        other_process.release("shared")

    in_trial = threading.Thread(target=trial)
    in_trial.start()
    in_trial.join(1.0)
    window.join(5)
    assert waits and waits[0] >= 0.3 and time.monotonic() - began >= 0.25
    lock.release("exclusive")
    in_trial.join(5)
    assert trial_waits and trial_waits[0] < 0.05  # its next trial was not kept out by a window asleep in the GPU


def test_a_workers_quiet_requests_are_bounded_one_by_one_and_per_request():
    """Candidate code shares the worker's process and could write to its link: a request may delay timing
    windows only as long as its own moves and releases could."""
    from envs.gpu_lock import RELEASE_SETTLE_MAX_S
    from envs.worker.process import QUIET_BUDGET_S, granted_quiet

    assert granted_quiet(0.02, QUIET_BUDGET_S) == 0.02
    assert granted_quiet(RELEASE_SETTLE_MAX_S, 0.01) == 0.01  # what is left of the request's allowance
    assert granted_quiet(0.02, 0.0) == 0.0
    for asked in (0, -1, RELEASE_SETTLE_MAX_S * 2, float("nan"), float("inf"), "0.01", None, True):
        with pytest.raises(ValueError, match="quiet period"):
            granted_quiet(asked, QUIET_BUDGET_S)
