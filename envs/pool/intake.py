"""Intake: an admitted request through the CPU stage on a driver thread, then answered (a cache hit, a static
finding) or handed to the dispatcher.

It keeps the CPU stage (`CpuStage.prepare`: extraction, static analysis, cache lookup) off the caller's thread and
off the event loop, and releases a request's admission when its future is done, whoever answered it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import threading
import time

from envs.cpu_stage import Candidate, CpuStage
from envs.pool.dispatch import Dispatcher
from envs.pool.metrics import PoolMetrics
from envs.pool.replies import Replies
from envs.pool.scheduler import Admission, Lifecycle, PoolClosedError, Request
from envs.pool.supervision import ActorSupervisor
from envs.problems import Problem
from envs.verdict import Verdict


class Intake:
    def __init__(
        self,
        cpu_stage: CpuStage,
        admission: Admission,
        dispatcher: Dispatcher,
        actors: ActorSupervisor,
        wake: threading.Condition,
        lifecycle: Lifecycle,
        metrics: PoolMetrics,
        replies: Replies,
        threads: int,
        cache_enabled: bool,
    ):
        self._cpu_stage, self._admission, self._dispatcher, self._actors = cpu_stage, admission, dispatcher, actors
        self._wake, self._lifecycle, self._metrics, self._replies = wake, lifecycle, metrics, replies
        self._cache_enabled = cache_enabled
        self._seq = itertools.count()
        self.preparing = 0  # requests in the CPU stage now (pool lock)
        self._threads = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="pool-cpu")

    def accept(self, problem: Problem, answer: str, rank: int) -> concurrent.futures.Future:
        """Admission is held; from here the request is answered exactly once."""
        request = Request(problem, answer, rank, next(self._seq))
        with self._wake:
            if self._lifecycle.closing:
                self._admission.release()
                raise PoolClosedError("the evaluation pool is closed")
            self.preparing += 1
            request.future.add_done_callback(functools.partial(self._done, request))
            self._threads.submit(self._prepare, request)
        self._metrics.count("submitted")
        return request.future

    def accept_job(self, candidate: Candidate, rank: int) -> concurrent.futures.Future:
        """Admission is held; queue a job that needs no CPU stage (a baselines-only job)."""
        request = Request(candidate.problem, "", rank, next(self._seq))
        request.future.add_done_callback(functools.partial(self._done, request))
        with self._wake:
            if self._lifecycle.closing:
                error = PoolClosedError("the evaluation pool is closed")
            elif self._actors.none_left():
                error = self._actors.starved_error()
            else:
                error = None
                self._dispatcher.enqueue(request, candidate)
        if error is not None:
            self._replies.send([request], error=error)
        return request.future

    def _prepare(self, request: Request) -> None:
        try:
            if request.future.cancelled():
                return
            started = time.monotonic()
            try:  # the CPU stage answers for the candidate; an exception here is the environment's
                prepared = self._cpu_stage.prepare(request.problem, request.answer)
            except Exception as e:
                self._replies.send([request], error=e)
                return
            self._metrics.observe("cpu_stage", time.monotonic() - started)
            if isinstance(prepared, Verdict):
                if prepared.cached:
                    self._metrics.count("cache_hits")
                self._replies.send([request], prepared)
                return
            if self._cache_enabled:
                self._metrics.count("cache_misses")
            with self._wake:
                if self._lifecycle.cancelled:
                    error = PoolClosedError("the evaluation pool was closed (drain=False) before this request ran")
                elif self._actors.none_left():
                    error = self._actors.starved_error()
                else:
                    error = None
                    if not self._dispatcher.enqueue(request, prepared):
                        return  # cancelled meanwhile
            if error is not None:
                self._replies.send([request], error=error)
        finally:
            with self._wake:
                self.preparing -= 1
                self._wake.notify_all()

    def _done(self, request: Request, future: concurrent.futures.Future) -> None:
        self._admission.release()
        if not future.cancelled():
            return
        self._metrics.count("cancelled")
        with self._wake:
            self._dispatcher.withdraw(request)

    def shutdown(self) -> None:
        """Wait for the requests in the CPU stage (after the lifecycle says closing)."""
        self._threads.shutdown(wait=True)
