"""The queued clock (envs.timing.QueuedCudaClock) on a GPU: host time inside the allowance is left out of the
samples, host time beyond it and host work after a device synchronization are counted. Run on a GPU."""

import time

import pytest
import torch

from envs.timing import KERNEL, CudaClock, QueuedCudaClock, interleaved_schedule, time_interleaved

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


@pytest.fixture(scope="module")
def tick():
    return torch.zeros(1, device="cuda")


def _host_then_kernel(tick, host_ms):
    def call():
        end = time.perf_counter() + host_ms / 1e3
        while time.perf_counter() < end:  # Python work before the launch, as a slow launch path does
            pass
        return tick.add(1)

    return call


def _median(clock, fn, runs=20):
    timed = time_interleaved({KERNEL: fn}, interleaved_schedule(runs, 0), clock=clock, warmup_ms=0)
    return sorted(timed.samples[KERNEL])[runs // 2]


def test_host_time_inside_the_allowance_is_left_out(tick):
    fn = _host_then_kernel(tick, 0.3)
    events = _median(CudaClock(), fn)
    queued = _median(QueuedCudaClock(2.0), fn)
    print(f"0.3 ms of host time before a one-element kernel: events {events:.4f} ms, queued {queued:.4f} ms")
    assert events >= 0.3
    assert queued < 0.1


def test_host_time_beyond_the_allowance_is_counted(tick):
    clock = QueuedCudaClock(0.5)
    queued = _median(clock, _host_then_kernel(tick, 1.5))
    exposed = sum(clock.exposed.values())
    print(f"1.5 ms of host time, allowance 0.5 ms: queued {queued:.4f} ms, {exposed} of 20 runs exposed")
    assert queued >= 0.9
    assert exposed == 20


def test_host_work_after_reading_the_device_is_counted(tick):
    """A result computed on the host must read the inputs first, which waits for the spin: what follows runs
    while the device idles inside the events."""
    x = torch.randn(4096, device="cuda")

    def on_the_host():
        values = x.tolist()  # synchronizes with the stream, spin included
        end = time.perf_counter() + 1e-3
        while time.perf_counter() < end:
            pass
        return torch.tensor(values, device="cuda")

    queued = _median(QueuedCudaClock(5.0), on_the_host)
    print(f"host computation of 1 ms after a read: queued {queued:.4f} ms")
    assert queued >= 1.0


def test_device_work_reads_the_same_with_either_clock():
    """A memory-bound kernel of ~0.7 ms: the clocks differ by the launch time the events clock adds (about
    0.01 ms on an H100), nothing more."""
    x = torch.randn(1 << 28, device="cuda")

    def call():
        return x.mul(2.0)

    events, queued = _median(CudaClock(), call), _median(QueuedCudaClock(1.0), call)
    print(f"a 1 GiB elementwise kernel: events {events:.4f} ms, queued {queued:.4f} ms")
    assert queued <= events * 1.01
    assert events - queued < 0.05
