"""Deadlines from the baseline: a hung candidate is cut seconds after it stops making progress.

The phase timeouts are minutes, sized for the slowest honest evaluation. While candidate code runs, every
step (the time between two completed candidate calls) also has a deadline derived from the problem:

    step deadline = fixed_s + multiple * (the reference model's seconds per call)
                    [+ up to compile_s per Triton launch still inside Triton's launcher, on CUDA]

Progress travels on a progress board: counters in a sealed memfd the worker writes and its parent reads,
cheap enough for timed runs. A forged report only lets a step run longer, never past the phase timeouts.
Why each term is there: docs/sandbox.md."""

from __future__ import annotations

import fcntl
import functools
import mmap
import os
import time
from typing import Any, Callable

from envs.settings import StepBudget

_CALLS, _LAUNCHES, _IN_LAUNCH = 0, 1, 2
_SIZE = 64  # bytes; three counters used


class ProgressBoard:
    """The shared counters; `create` in the parent, `attach` in the worker."""

    def __init__(self, fd: int):
        self.fd = fd
        self._map = mmap.mmap(fd, _SIZE)
        self._slots = memoryview(self._map).cast("Q")

    @classmethod
    def create(cls) -> ProgressBoard | None:
        """A new board, or None where memfd or sealing is unavailable (the phase timeouts still apply).
        Sealed against resizing: a candidate truncating the shared file would crash its reader."""
        if not hasattr(os, "memfd_create") or not hasattr(fcntl, "F_ADD_SEALS"):
            return None
        try:
            fd = os.memfd_create("kernelrl-progress", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, _SIZE)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            return cls(fd)
        except OSError:
            return None

    @classmethod
    def attach(cls, fd: int) -> ProgressBoard | None:
        if fd < 0:
            return None
        board = cls(fd)
        os.close(fd)  # the mapping stays
        return board

    def close_fd(self) -> None:
        """The parent's descriptor, once the worker has its own."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def close(self) -> None:
        self.close_fd()
        self._slots.release()
        self._map.close()

    # worker side
    def call_done(self) -> None:
        self._slots[_CALLS] += 1

    def install_launch_flag(self) -> None:
        """Mark the time spent inside Triton's launcher (compiling, autotuning) on a GPU. Installed in
        the worker before candidate code exists and before the harness snapshots Triton's identities."""
        install_launch_flag(lambda: self)

    def flagged(self, run: Callable) -> Callable:
        """`run` marking the board while it runs (a launch begun, in progress)."""
        return _flagged(run, lambda: self)

    # parent side
    def read(self) -> tuple[int, int, bool]:
        return self._slots[_CALLS], self._slots[_LAUNCHES], bool(self._slots[_IN_LAUNCH])


def install_launch_flag(board: Callable[[], ProgressBoard | None]) -> None:
    """ProgressBoard.install_launch_flag with the board looked up at each launch (None: not marked): a
    zygote (envs/worker/zygote.py) installs it before the snapshots, when its children's boards do not
    exist yet."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    for cls in (JITFunction, Autotuner):
        cls.run = _flagged(cls.run, board)


def _flagged(run: Callable, board: Callable[[], ProgressBoard | None]) -> Callable:
    @functools.wraps(run)
    def flagged_run(*args: Any, **kwargs: Any) -> Any:
        current = board()
        if current is None:
            return run(*args, **kwargs)
        slots = current._slots
        outer = slots[_IN_LAUNCH]  # an autotuner's launches nest inside its own
        slots[_LAUNCHES] += 1
        slots[_IN_LAUNCH] = 1
        try:
            return run(*args, **kwargs)
        finally:
            slots[_IN_LAUNCH] = outer

    return flagged_run


class StepWatch:
    """Parent side, for one evaluation: the deadline of the current step of a candidate phase."""

    def __init__(
        self,
        board: ProgressBoard,
        budget: StepBudget,
        reference_s: float,
        allow_compile: bool,
        now: float | None = None,
    ):
        self.board, self.budget, self.reference_s = board, budget, reference_s
        self.step_s = budget.step_seconds(reference_s)
        self.compile_s = budget.compile_s if allow_compile else 0.0
        self._calls = board.read()[0]
        self._since = time.monotonic() if now is None else now
        self._excused = 0.0  # compilation time in this step, from launches that have ended
        self._launch: int | None = None  # the launch seen in progress: its number, first and last seen
        self._launch_first = self._launch_last = 0.0

    def restart(self, now: float) -> None:
        """A new phase starts a new step."""
        self._calls, self._since, self._excused, self._launch = self.board.read()[0], now, 0.0, None

    def pause(self, seconds: float) -> None:
        """Time the worker spent waiting for the GPU is not the candidate's."""
        self._since += seconds
        self._launch_first += seconds
        self._launch_last += seconds

    def deadline(self, now: float) -> float:
        calls, launches, in_launch = self.board.read()
        if calls != self._calls:
            self.restart(now)
        in_launch = in_launch and self.compile_s > 0
        if self._launch is not None and (not in_launch or launches != self._launch):
            # Only what was seen of one launch counts: a stream of short launches (a host loop that never
            # ends) earns nothing, a compile seen for seconds earns those seconds.
            self._excused += min(self._launch_last - self._launch_first, self.compile_s)
            self._launch = None
        current = 0.0
        if in_launch:
            if self._launch is None:
                self._launch, self._launch_first = launches, now
            self._launch_last = now
            current = min(now - self._launch_first, self.compile_s)
        return self._since + self.step_s + self._excused + current

    def describe(self) -> str:
        return (
            f"no call of the candidate's code finished within its derived step deadline of {self.step_s:.1f} s "
            f"({self.budget.fixed_s:g} s + {self.budget.multiple:g} x the reference's "
            f"{self.reference_s * 1e3:.3f} ms per call)"
        )
