"""Shared/exclusive locks for one GPU: correctness runs may overlap, timing runs never share the GPU.

`DeviceLock` orders the evaluation workers of one process; `GpuGate` extends it to every process on the
host that runs work on the same GPU (a colocated rollout engine and learner, another evaluator: each holds
it shared while its kernels run), so a timed window never overlaps another process's kernels.

Quiet periods: memory given back to the driver slows memory-bound kernels for a while after (docs/gpu-notes.md,
session 42). Whoever gives a lot back says so (`quiet`), and no exclusive hold starts until the period is over;
shared work goes on through it, so the GPU does correctness runs instead of idling inside a timing window.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

# The longest quiet period one call asks for; an end further ahead than this is stale (a host clock since reset)
MAX_QUIET_S = 1.0
# How long a release keeps the GPU slow: 10-20% for ~10-20 ms after ~13 GB on the H100 (docs/gpu-notes.md,
# session 42), so 2 ms per GB, at most RELEASE_SETTLE_MAX_S.
RELEASE_SETTLE_S_PER_BYTE = 2e-3 / 1e9
RELEASE_SETTLE_MAX_S = 0.05


def release_settle_seconds(released_bytes: int) -> float:
    """How long the GPU should run no timed window after `released_bytes` went back to the driver."""
    return min(RELEASE_SETTLE_MAX_S, max(0, released_bytes) * RELEASE_SETTLE_S_PER_BYTE)


def host_gpu_ids(count: int) -> list[int | str]:
    """The GPUs this process sees, as a worker's CUDA_VISIBLE_DEVICES must name them: the host's names from
    our own CUDA_VISIBLE_DEVICES when it is set (CUDA's index 0 is then its first entry, not GPU 0), else
    0..count-1."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return list(range(count))
    return [int(d) if d.isdigit() else d for d in visible[:count]]


def _gate_dir() -> Path:
    """Where the gates' lock files live: host-wide (/dev/shm where it exists), so every process sees them."""
    return Path(
        os.environ.get("KERNELRL_GPU_GATE_DIR") or ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    )


class GpuGate:
    """A readers-writer lock on one physical GPU across the processes of a host (flock on two files).

    Writers (timing) take a turnstile first, so once one waits, new readers queue behind it and the
    readers already in finish their step: a timing window waits at most one reader step. A holder that
    dies releases its locks with its file descriptors. Shared holds may come from any thread; the exclusive
    side serves one thread at a time."""

    def __init__(self, gpu: int | str, directory: str | Path | None = None):
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(gpu))
        root = Path(directory) if directory is not None else _gate_dir()
        self.gpu = gpu
        self._paths = (root / f"kernelrl-gpu-{name}.lock", root / f"kernelrl-gpu-{name}.turnstile")
        self._main = os.open(self._paths[0], os.O_RDWR | os.O_CREAT, 0o666)
        self._turnstile = os.open(self._paths[1], os.O_RDWR | os.O_CREAT, 0o666)
        # the end of the GPU's quiet period (time.monotonic: one clock for the whole host), as 8 bytes
        self._quiet = os.open(root / f"kernelrl-gpu-{name}.quiet", os.O_RDWR | os.O_CREAT, 0o666)

    @classmethod
    def for_current_device(cls) -> GpuGate | None:
        """The gate of the CUDA device this process computes on, or None without CUDA."""
        import torch

        if not torch.cuda.is_available():
            return None
        return cls(host_gpu_ids(torch.cuda.device_count())[torch.cuda.current_device()])

    def acquire_exclusive(self) -> float:
        """Block until no other process holds the GPU; return the seconds waited."""
        start = time.monotonic()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._main, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        return time.monotonic() - start

    def release(self) -> None:
        fcntl.flock(self._main, fcntl.LOCK_UN)

    def quiet_until(self, until: float) -> None:
        """No exclusive hold on this GPU starts before `until` (time.monotonic), in any process."""
        fcntl.flock(self._quiet, fcntl.LOCK_EX)
        try:
            if until > self._read_quiet():
                os.pwrite(self._quiet, struct.pack("d", until), 0)
        finally:
            fcntl.flock(self._quiet, fcntl.LOCK_UN)

    def quiet_end(self) -> float:
        """When this GPU's quiet period ends (time.monotonic; in the past when there is none)."""
        fcntl.flock(self._quiet, fcntl.LOCK_SH)
        try:
            return self._read_quiet()
        finally:
            fcntl.flock(self._quiet, fcntl.LOCK_UN)

    def _read_quiet(self) -> float:
        data = os.pread(self._quiet, 8, 0)
        end = struct.unpack("d", data)[0] if len(data) == 8 else 0.0
        return end if end <= time.monotonic() + MAX_QUIET_S else 0.0

    def hold_shared(self) -> int:
        """Take the GPU shared on a descriptor of its own (flock locks belong to an open file, so holders in
        one process stay independent: each blocks a writer until it lets go); returns it for `let_go`."""
        turnstile = os.open(self._paths[1], os.O_RDWR)
        try:
            fcntl.flock(turnstile, fcntl.LOCK_SH)  # waits while a writer queues or holds the GPU
        finally:
            os.close(turnstile)
        held = os.open(self._paths[0], os.O_RDWR)
        try:
            fcntl.flock(held, fcntl.LOCK_SH)
        except BaseException:
            os.close(held)
            raise
        return held

    @staticmethod
    def let_go(held: int) -> None:
        os.close(held)  # closing the descriptor drops its lock

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held around one step of GPU work (a decode step, a micro-batch) of a process sharing the GPU."""
        held = self.hold_shared()
        try:
            yield
        finally:
            self.let_go(held)

    def close(self) -> None:
        for fd in (self._main, self._turnstile, self._quiet):
            with contextlib.suppress(OSError):
                os.close(fd)


class DeviceLock:
    """Readers-writer lock with writer preference, so timing is never starved by correctness runs. With a
    `gate`, both sides also hold the host-wide GpuGate: an exclusive hold keeps other processes' GPU work
    out of the window, and each shared hold (a worker's correctness trial) keeps out other processes'
    windows (a second evaluator on the same GPU). A thread releases the hold it acquired."""

    def __init__(self, gate: GpuGate | None = None) -> None:
        self.gate = gate
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self._gate_holds: dict[int, int] = {}  # thread -> its shared hold on the gate
        self._quiet_end = 0.0  # time.monotonic; without a gate the quiet period is this process's only

    def quiet(self, seconds: float) -> None:
        """Memory went back to the driver: no exclusive hold starts in the next `seconds`."""
        until = time.monotonic() + min(MAX_QUIET_S, max(0.0, seconds))
        with self._cond:
            self._quiet_end = max(self._quiet_end, until)
            self._cond.notify_all()  # a queued exclusive hold steps back out of the shared holds' way
        if self.gate is not None:
            self.gate.quiet_until(until)

    def _quiet_left(self) -> float:
        end = max(self._quiet_end, self.gate.quiet_end() if self.gate is not None else 0.0)
        return end - time.monotonic()

    def acquire(self, mode: str) -> float:
        """Block until granted; return the seconds spent waiting. An exclusive hold waits out a quiet period
        before it queues, and steps out of the queue when one starts while it waits (here or in another
        process), so shared holds go on meanwhile."""
        start = time.monotonic()
        if mode == "shared":
            with self._cond:
                self._cond.wait_for(lambda: not self._exclusive and self._waiting_exclusive == 0)
                self._shared += 1
            if self.gate is not None:
                try:
                    self._gate_holds[threading.get_ident()] = self.gate.hold_shared()
                except BaseException:
                    self.release(mode, gate=False)
                    raise
        elif mode == "exclusive":
            while True:
                self._take_exclusive_here()
                if self.gate is not None:
                    try:
                        self.gate.acquire_exclusive()  # our own workers are out; now the other processes
                    except BaseException:
                        self.release(mode, gate=False)
                        raise
                if self._quiet_left() <= 0:
                    break
                self.release(mode)  # another process gave memory back while this one queued: its turn again
        else:
            raise ValueError(f"unknown lock mode {mode!r}")
        return time.monotonic() - start

    def _take_exclusive_here(self) -> None:
        """This process's side of an exclusive hold: no quiet period, no shared holds, no other window."""
        with self._cond:
            while True:
                while (left := self._quiet_left()) > 0:
                    self._cond.wait(left)
                self._waiting_exclusive += 1
                try:
                    self._cond.wait_for(
                        lambda: (not self._exclusive and self._shared == 0) or self._quiet_end > time.monotonic()
                    )
                finally:
                    self._waiting_exclusive -= 1
                if self._quiet_end <= time.monotonic():
                    break
                self._cond.notify_all()  # out of the queue: the shared holds it kept waiting may start
            self._exclusive = True

    def release(self, mode: str, gate: bool = True) -> None:
        if gate and self.gate is not None:
            if mode == "exclusive":
                self.gate.release()
            else:
                self.gate.let_go(self._gate_holds.pop(threading.get_ident()))
        with self._cond:
            if mode == "exclusive":
                self._exclusive = False
            else:
                self._shared -= 1
            self._cond.notify_all()
