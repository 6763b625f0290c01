"""How many evaluations run on one GPU at once: as many as its memory holds, fewer after it ran out anyway.

Two limits, both checked before a worker starts an evaluation (`admit`):

- Memory. Each problem's evaluations reserve about the same device memory (its inputs, reference outputs, the
  float64 truth, the timing's placement copies), so the GPU admits an evaluation only while the GiB its admitted
  evaluations are expected to reserve fit the device (`capacity_gib`: its total less a CUDA context per worker).
  What a problem needs is the most its last `NEED_WINDOW` evaluations reserved (`observe`, from the worker's
  per-phase report); a problem not seen yet is given an even share of the device. Without it, large problems
  that met on one GPU ran it out of memory, and each such error cost a retry and a halved count for every
  problem, small ones included (docs/gpu-notes.md, sessions 28-29).
- Count. An evaluation that fails on the environment's out-of-memory error anyway (other processes on the GPU:
  the colocated learner and engine, which the ledger does not see; envs/worker/oom.py) is retried; retried beside
  the same neighbours it mostly fails again, since what filled the GPU is still there. So each such error halves
  the number of evaluations the GPU admits at once (never below one), and the number grows back by one after
  `recover_after` evaluations in a row that got through: additive increase, multiplicative decrease, as a TCP
  congestion window. Evaluations that failed together count as one cut, so four workers failing at once halve
  the limit once, not four times.

One evaluation is always admitted on an idle GPU, whatever it is expected to need.

Order: waiting evaluations go in arrival order, except that one which fits may overtake earlier ones which do
not (a 10 GiB softmax beside two 27 GiB sigmoids, while a third sigmoid waits for one of them), each waiting
evaluation at most `MAX_OVERTAKEN` times: a large problem still gets in after a bounded number of small ones. In
strict order a failing candidate of a small problem waited behind a large one as long as a correct one. A small
bound gains nothing: each large problem at the head uses it up at once and then holds the queue again (the
replay that chose 16: docs/gpu-notes.md, session 33).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Iterator

CONTEXT_GIB = 0.75  # what one worker's CUDA context holds outside the allocator's reserved memory
NEED_WINDOW = 16  # a problem's need is the most any of its last NEED_WINDOW evaluations reserved
MAX_OVERTAKEN = 16  # later arrivals that may go ahead of a waiting evaluation which does not fit yet


class _Arrival:
    """A waiting evaluation: what it is expected to reserve, and how many later ones went ahead of it."""

    __slots__ = ("need", "overtaken")

    def __init__(self, need: float):
        self.need, self.overtaken = need, 0


class GpuConcurrency:
    """The admission of one GPU's evaluations, shared by the threads that run them (envs/worker/worker_set.py)."""

    def __init__(self, ceiling: int, recover_after: int = 8):
        if ceiling < 1 or recover_after < 1:
            raise ValueError(f"ceiling and recover_after must be >= 1, not {ceiling} and {recover_after}")
        self.ceiling = ceiling
        self.recover_after = recover_after
        self.limit = ceiling
        self.cuts = 0  # times the limit was halved
        self.capacity_gib: float | None = None  # unknown until a worker reports its device (`know_device`)
        self._needs: dict[str, collections.deque[float]] = {}
        self._running = 0
        self._held_gib = 0.0  # what the admitted evaluations are expected to reserve
        self._arrivals: list[_Arrival] = []  # waiting evaluations, oldest first
        self._streak = 0  # evaluations in a row that got through since the last cut or raise
        self._changed = threading.Condition()

    def know_device(self, total_gib: float | None) -> None:
        """The GPU's total memory, as a worker reports it; the first report sets the capacity."""
        if total_gib is None or self.capacity_gib is not None:
            return
        with self._changed:
            self.capacity_gib = max(0.0, float(total_gib) - self.ceiling * CONTEXT_GIB)
            self._changed.notify_all()

    def need(self, key: str | None) -> float:
        """GiB an evaluation of `key` (a problem) is expected to reserve at most: 0 while the device's memory is
        unknown, an even share of it for a problem not seen yet."""
        if self.capacity_gib is None:
            return 0.0
        seen = self._needs.get(key) if key is not None else None
        return max(seen) if seen else self.capacity_gib / self.ceiling

    def observe(self, key: str | None, reserved_gib: float | None) -> None:
        """The most GiB an evaluation of `key` reserved (its worker's peak over its phases)."""
        if key is None or reserved_gib is None:
            return
        with self._changed:
            self._needs.setdefault(key, collections.deque(maxlen=NEED_WINDOW)).append(float(reserved_gib))

    def _fits(self, need: float) -> bool:
        if self._running >= self.limit:
            return False
        return self._running == 0 or self.capacity_gib is None or self._held_gib + need <= self.capacity_gib

    def _may_enter(self, arrival: _Arrival) -> bool:
        """`arrival` fits now, and every evaluation that arrived before it either does not fit and may still be
        overtaken, or is gone."""
        if not self._fits(arrival.need):
            return False
        ahead = self._arrivals[: self._arrivals.index(arrival)]
        return all(not self._fits(a.need) and a.overtaken < MAX_OVERTAKEN for a in ahead)

    @contextlib.contextmanager
    def admit(self, key: str | None = None) -> Iterator[tuple[int, float]]:
        """Wait until the GPU admits one more evaluation of `key` (a problem id; None: its memory is not
        counted), in arrival order but for bounded overtaking (the module's docstring); yields (the count limit
        it was admitted under, seconds waited). Report how it ended with `out_of_memory` or `got_through` before
        leaving."""
        started = time.monotonic()
        with self._changed:
            arrival = _Arrival(self.need(key) if key is not None else 0.0)
            self._arrivals.append(arrival)
            try:
                while not self._may_enter(arrival):
                    self._changed.wait()
                for earlier in self._arrivals[: self._arrivals.index(arrival)]:
                    earlier.overtaken += 1
            finally:
                self._arrivals.remove(arrival)
                self._changed.notify_all()  # the next in line may fit as well
            self._running += 1
            need = arrival.need
            self._held_gib += need
            admitted_under = self.limit
        try:
            yield admitted_under, time.monotonic() - started
        finally:
            with self._changed:
                self._running -= 1
                self._held_gib = max(0.0, self._held_gib - need)
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
