"""Shared/exclusive lock for one GPU: correctness runs may overlap, timing runs never share the GPU."""

from __future__ import annotations

import threading
import time


class DeviceLock:
    """Readers-writer lock with writer preference, so timing is never starved by correctness runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    def acquire(self, mode: str) -> float:
        """Block until granted; return the seconds spent waiting."""
        start = time.monotonic()
        with self._cond:
            if mode == "exclusive":
                self._waiting_exclusive += 1
                try:
                    self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
                finally:
                    self._waiting_exclusive -= 1
                self._exclusive = True
            elif mode == "shared":
                self._cond.wait_for(lambda: not self._exclusive and self._waiting_exclusive == 0)
                self._shared += 1
            else:
                raise ValueError(f"unknown lock mode {mode!r}")
        return time.monotonic() - start

    def release(self, mode: str) -> None:
        with self._cond:
            if mode == "exclusive":
                self._exclusive = False
            else:
                self._shared -= 1
            self._cond.notify_all()
