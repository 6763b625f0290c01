"""Bookkeeping of the evaluation pool that needs neither Ray nor workers: admission (backpressure),
the priority queue, deduplication of identical in-flight candidates, once-per-problem baselines, and the
pool's lifecycle flags.

A `Request` is one caller's submission; a `Job` is one execution, shared by every request whose
candidate has the same verdict key while the job is in flight. `JobQueue` is not thread-safe: the
pool calls it with its lock held.
"""

from __future__ import annotations

import collections
import concurrent.futures
import enum
import heapq
import itertools
import threading
import time
from typing import Any, Callable

from envs.worker.worker_set import EvaluatorError

# Lower runs first. `baseline`: baselines measured before anything needs them (EvaluationPool.prepare_baselines);
# a candidate that needs one lends it its rank (JobQueue._lend_rank), so they never hold back unrelated candidates.
PRIORITIES = {"validation": 0, "train": 1, "baseline": 2}


class PoolFullError(RuntimeError):
    """Backpressure: the pool already holds `max_pending` unanswered requests."""


class PoolClosedError(EvaluatorError):
    """The pool is closed, or was closed with drain=False before this request ran."""


def priority_rank(priority: str) -> int:
    try:
        return PRIORITIES[priority]
    except (KeyError, TypeError):
        raise ValueError(f"priority must be one of {sorted(PRIORITIES)}, not {priority!r}") from None


class Admission:
    """A counting gate on unanswered requests: acquire when a request is accepted, release when answered."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("max_pending must be >= 1")
        self.limit = limit
        self.pending = 0
        self._cond = threading.Condition()
        self._closed = False

    def acquire(self, n: int = 1, block: bool = True, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if n > self.limit:
                raise PoolFullError(f"cannot admit {n} requests at once: max_pending is {self.limit}")
            while not self._closed and self.pending + n > self.limit:
                if not block:
                    raise PoolFullError(
                        f"the evaluation pool is full: {self.pending} requests pending (max_pending={self.limit}); "
                        "wait for results, submit with block=True, or raise pool.max_pending"
                    )
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise PoolFullError(
                        f"the evaluation pool stayed full for {timeout:g} s: {self.pending} requests pending "
                        f"(max_pending={self.limit})"
                    )
                self._cond.wait(remaining)
            if self._closed:
                raise PoolClosedError("the evaluation pool is closed")
            self.pending += n

    def release(self, n: int = 1) -> None:
        with self._cond:
            self.pending -= n
            self._cond.notify_all()

    def close(self) -> None:
        """New and blocked acquisitions fail with PoolClosedError; pending ones still release."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.pending == 0, timeout)


class Lifecycle:
    """How far the pool is in closing; read by every component, written by `EvaluationPool.close` (pool lock held)."""

    def __init__(self) -> None:
        self.closing = False  # no new submissions
        self.cancelled = False  # close(drain=False): unfinished requests are answered with PoolClosedError
        self.stopped = False  # the dispatcher stops; actors are being stopped

    @property
    def ending(self) -> bool:
        """Nothing more will run: dead actors are not replaced."""
        return self.stopped or self.cancelled


class JobState(enum.Enum):
    QUEUED = "queued"  # waiting for a free actor slot
    PARKED = "parked"  # waiting for another job to measure its problem's baselines
    RUNNING = "running"  # on an actor
    FINISHING = "finishing"  # executed; cache and judge being done
    DONE = "done"  # answered (or cancelled)


_ACTIVE = (JobState.QUEUED, JobState.PARKED, JobState.RUNNING, JobState.FINISHING)


class Request:
    """One caller's submission."""

    __slots__ = ("future", "problem", "answer", "rank", "seq", "submitted", "job")

    def __init__(self, problem: Any, answer: str, rank: int, seq: int):
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.problem, self.answer, self.rank, self.seq = problem, answer, rank, seq
        self.submitted = time.monotonic()
        self.job: Job | None = None


class Job:
    """One execution of a candidate, answering every request attached to it."""

    def __init__(self, candidate: Any, request: Request):
        self.candidate = candidate
        self.key: str = candidate.verdict_key
        self.baseline_key: str = candidate.baseline_key
        self.requests: list[Request] = [request]
        self.rank, self.seq = request.rank, request.seq  # FIFO by submission within a priority
        self.state = JobState.QUEUED
        self.entry = -1  # the heap entry that is current; older ones are stale
        self.attempts = 0
        self.measuring = False  # this job measures its problem's baselines
        self.baselines_only = candidate.solution is None  # EvaluationPool.prepare_baselines' job
        self.created = time.monotonic()
        self.enqueued = self.created
        self.dispatched = 0.0
        self.queue_wait = 0.0
        self.actor: Any = None
        self.failures: list[str] = []  # why earlier attempts were lost

    def __repr__(self) -> str:
        return f"Job({self.candidate.problem.id}, {self.key[:8]}, {self.state.value}, rank={self.rank})"


class JobQueue:
    """Priority queue of jobs with a dedup index by verdict key and baseline gating by baseline key.

    A queued baselines-only job is its problem's measurer from the moment it is pushed: the problem's candidates
    park on it instead of measuring again, and lend it their rank when it is lower (priority inheritance).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Job]] = []
        self._entries = itertools.count()
        self._by_key: dict[str, Job] = {}
        self._parked: collections.defaultdict[str, list[Job]] = collections.defaultdict(list)
        self._measuring: dict[str, Job] = {}

    # --- dedup ------------------------------------------------------------------------------------
    def get(self, key: str) -> Job | None:
        """The in-flight job for a verdict key, if any (a new identical request attaches to it)."""
        job = self._by_key.get(key)
        return job if job is not None and job.state in _ACTIVE else None

    def attach(self, job: Job, request: Request) -> None:
        job.requests.append(request)
        if request.rank < job.rank:  # a validation request promotes a queued training job
            job.rank = request.rank
            if job.state is JobState.QUEUED:
                self._enqueue(job)
            self._lend_rank(job)

    # --- queue ------------------------------------------------------------------------------------
    def push(self, job: Job) -> None:
        self._by_key[job.key] = job
        job.enqueued = time.monotonic()
        self._claim(job)
        self._lend_rank(job)  # on arrival, so the measurement is ahead of this job in the heap
        self._enqueue(job)

    def _enqueue(self, job: Job) -> None:
        job.state = JobState.QUEUED
        job.entry = next(self._entries)
        heapq.heappush(self._heap, (job.rank, job.seq, job.entry, job))

    def pop(self, lookup: Callable[[Job], dict | None] | None = None) -> tuple[Job, dict | None] | None:
        """The next job to run and its known baselines, or None.

        With `lookup` (CUDA: baselines are measured on the device), a job whose problem has no known
        baselines either becomes the one job measuring them (baselines None) or is parked until that
        job finishes, so each problem's baselines are measured once per device kind.
        """
        while self._heap:
            _, _, entry, job = heapq.heappop(self._heap)
            if job.state is not JobState.QUEUED or entry != job.entry:
                continue  # stale entry
            baselines = None
            if lookup is not None:
                baselines = lookup(job)
                if baselines is None:
                    if self._measuring.get(job.baseline_key) not in (None, job):
                        job.state = JobState.PARKED
                        self._parked[job.baseline_key].append(job)
                        self._lend_rank(job)
                        continue
                    self._measuring[job.baseline_key] = job
                    job.measuring = True
            job.state = JobState.RUNNING
            return job, baselines
        return None

    def requeue(self, job: Job) -> None:
        """Run the job again (its actor died), ahead of later submissions of its priority."""
        self._release_baselines(job)
        job.enqueued = time.monotonic()
        self._claim(job)
        self._enqueue(job)

    def finish(self, job: Job) -> None:
        """The job is answered: drop it from the dedup index and wake jobs parked on its baselines."""
        job.state = JobState.DONE
        if self._by_key.get(job.key) is job:
            del self._by_key[job.key]
        self._release_baselines(job)

    def remove(self, job: Job) -> None:
        """Drop a queued or parked job whose callers all cancelled."""
        if job.state is JobState.PARKED:
            parked = self._parked.get(job.baseline_key, [])
            if job in parked:
                parked.remove(job)
        self.finish(job)

    def _claim(self, job: Job) -> None:
        """A baselines-only job becomes its problem's measurer while it waits, unless another job measures."""
        if job.baselines_only and job.baseline_key not in self._measuring:
            self._measuring[job.baseline_key] = job
            job.measuring = True

    def _lend_rank(self, job: Job) -> None:
        """Priority inheritance: the queued measurer of the job's baselines moves up to the job's rank (and ahead
        of it) when it would run later, so the job waits for its measurement only, not behind unrelated work."""
        measurer = self._measuring.get(job.baseline_key)
        if (
            measurer is None
            or measurer.state is not JobState.QUEUED
            or (measurer.rank, measurer.seq) <= (job.rank, job.seq)
        ):
            return
        measurer.rank, measurer.seq = job.rank, min(measurer.seq, job.seq)  # ahead of the job that lent the rank
        self._enqueue(measurer)

    def _release_baselines(self, job: Job) -> None:
        if job.measuring:
            job.measuring = False
            if self._measuring.get(job.baseline_key) is job:
                del self._measuring[job.baseline_key]
            for parked in self._parked.pop(job.baseline_key, []):
                if parked.state is JobState.PARKED:
                    self._enqueue(parked)

    def take_all(self) -> list[Job]:
        """Every queued or parked job, removed (close without draining)."""
        jobs = [j for j in self._by_key.values() if j.state in (JobState.QUEUED, JobState.PARKED)]
        for job in jobs:
            self.remove(job)
        return jobs

    def counts(self) -> dict[str, int]:
        c = collections.Counter(j.state for j in self._by_key.values())
        return {
            "queued": c[JobState.QUEUED],
            "parked": c[JobState.PARKED],
            "running": c[JobState.RUNNING],
            "finishing": c[JobState.FINISHING],
        }

    def __len__(self) -> int:
        return sum(1 for j in self._by_key.values() if j.state in (JobState.QUEUED, JobState.PARKED))
