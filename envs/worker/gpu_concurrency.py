"""How many evaluations run on one GPU at once: all of its workers while its memory allows, fewer after it ran out.

An evaluation that fails on the environment's out-of-memory error (the GPU full of other processes,
envs/worker/oom.py) is retried; retried beside the same neighbours it mostly fails again, since what filled the
GPU is still there. So each such error halves the number of evaluations the GPU admits at once (never below one),
and the number grows back by one after `recover_after` evaluations in a row that got through: additive increase,
multiplicative decrease, as a TCP congestion window. Evaluations that failed together count as one cut, so four
workers failing at once halve the limit once, not four times.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator


class GpuConcurrency:
    """The admission of one GPU's evaluations, shared by the threads that run them (envs/worker/worker_set.py)."""

    def __init__(self, ceiling: int, recover_after: int = 8):
        if ceiling < 1 or recover_after < 1:
            raise ValueError(f"ceiling and recover_after must be >= 1, not {ceiling} and {recover_after}")
        self.ceiling = ceiling
        self.recover_after = recover_after
        self.limit = ceiling
        self.cuts = 0  # times the limit was halved
        self._running = 0
        self._streak = 0  # evaluations in a row that got through since the last cut or raise
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def admit(self) -> Iterator[tuple[int, float]]:
        """Wait until the GPU admits one more evaluation; yields (the limit it was admitted under, seconds
        waited). Report how it ended with `out_of_memory` or `got_through` before leaving."""
        started = time.monotonic()
        with self._changed:
            while self._running >= self.limit:
                self._changed.wait()
            self._running += 1
            admitted_under = self.limit
        try:
            yield admitted_under, time.monotonic() - started
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def out_of_memory(self, admitted_under: int) -> None:
        """An evaluation admitted under `admitted_under` ran out of memory because of other processes."""
        with self._changed:
            self._streak = 0
            target = max(1, admitted_under // 2)
            if target < self.limit:  # a second failure of the same crowd is not a second cut
                self.limit = target
                self.cuts += 1

    def got_through(self) -> None:
        """An evaluation finished without the environment's out-of-memory error."""
        with self._changed:
            self._streak += 1
            if self._streak >= self.recover_after and self.limit < self.ceiling:
                self.limit += 1
                self._streak = 0
                self._changed.notify_all()
