"""Submission: admission (backpressure), the CPU stage and the queue.

`submit` and the `evaluate*` methods admit a request (blocking while `max_pending` are unanswered), run the
CPU stage (`CpuStage.prepare`: extraction, static analysis, cache) on a driver thread, answer cache hits at
once, and attach the rest to an identical job in flight or queue a new one for the dispatcher
(envs/pool/dispatch.py).

A mixin of `envs.pool.core.EvaluationPool` (its state: `_lock`, `_wake`, `_queue`, `_admission`, `_seq`,
`_cpu`, `_preparing`, `_closing`, `_cancelled`, `_actors`, `_launching`, `_metrics`, `preparer`, `cache`);
separate from dispatch and actor supervision (envs/pool/supervision.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from typing import Iterable, Iterator

from envs.pool.scheduler import Job, JobState, PoolClosedError, PoolFullError, Request, priority_rank
from envs.problems import Problem
from envs.verdict import Verdict


class SubmissionStage:
    """Admission, the CPU stage and the queue: a mixin of EvaluationPool."""

    # --- submission -------------------------------------------------------------------------------
    def submit(self, problem: Problem, answer: str, priority: str = "train", block: bool = True,
               timeout: float | None = None) -> concurrent.futures.Future:
        """Queue one evaluation; a Future of its Verdict. Blocks while `max_pending` requests are
        unanswered (block=False: raise PoolFullError at once; timeout: after that many seconds)."""
        rank = priority_rank(priority)
        if self._closing:
            raise PoolClosedError("the evaluation pool is closed")
        self._admission.acquire(1, block, timeout)
        return self._accept(problem, answer, rank)

    def submit_batch(self, items: Iterable[tuple[Problem, str]], priority: str = "train", block: bool = True,
                     timeout: float | None = None) -> list[concurrent.futures.Future]:
        """Queue several evaluations in order. block=False admits all or none."""
        items = list(items)
        rank = priority_rank(priority)
        if self._closing:
            raise PoolClosedError("the evaluation pool is closed")
        if not block:
            if items:
                self._admission.acquire(len(items), block=False)
            futures = []
            for i, (p, a) in enumerate(items):
                try:
                    futures.append(self._accept(p, a, rank))
                except BaseException:
                    self._admission.release(len(items) - i - 1)  # _accept released its own
                    raise
            return futures
        futures = []
        deadline = None if timeout is None else time.monotonic() + timeout
        for p, a in items:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._admission.acquire(1, True, remaining)
            futures.append(self._accept(p, a, rank))
        return futures

    def _accept(self, problem: Problem, answer: str, rank: int) -> concurrent.futures.Future:
        """Admission is held; from here the request is answered exactly once."""
        request = Request(problem, answer, rank, next(self._seq))
        with self._lock:
            if self._closing:
                self._admission.release()
                raise PoolClosedError("the evaluation pool is closed")
            self._preparing += 1
            request.future.add_done_callback(functools.partial(self._request_done, request))
            self._cpu.submit(self._prepare, request)
        self._metrics.count("submitted")
        return request.future

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        """Awaitable evaluation; waits for room without blocking the event loop."""
        try:
            future = self.submit(problem, answer, priority, block=False)
        except PoolFullError:
            loop = asyncio.get_running_loop()
            future = await loop.run_in_executor(None, functools.partial(self.submit, problem, answer, priority))
        return await asyncio.wrap_future(future)

    def evaluate(self, problem: Problem, answer: str, priority: str = "train", block: bool = True,
                 timeout: float | None = None) -> Verdict:
        """Evaluate one answer and wait for its Verdict (like Evaluator.evaluate). `block`/`timeout`
        apply to admission only (see submit): a full pool raises PoolFullError when block=False."""
        return self.submit(problem, answer, priority, block, timeout).result()

    def iter_evaluate(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                      desc: str = "evaluating", priority: str = "train") -> Iterator[Verdict]:
        """Evaluate concurrently on every actor; yield verdicts in input order as they are ready."""
        items = list(items)
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(items), desc=desc, unit="eval", dynamic_ncols=True)
        futures: list[concurrent.futures.Future] = []
        try:
            for p, a in items:
                futures.append(self.submit(p, a, priority))
                if bar is not None:
                    futures[-1].add_done_callback(lambda _: bar.update())
            for f in futures:
                yield f.result()
        finally:
            for f in futures:
                f.cancel()  # only requests that have not started yet
            if bar is not None:
                bar.close()

    def evaluate_many(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                      desc: str = "evaluating", priority: str = "train") -> list[Verdict]:
        return list(self.iter_evaluate(items, progress, desc, priority))

    # --- CPU stage --------------------------------------------------------------------------------
    def _prepare(self, request: Request) -> None:
        try:
            if request.future.cancelled():
                return
            started = time.monotonic()
            try:  # the CpuStage answers for the candidate; an exception here is the environment's
                prepared = self.cpu_stage.prepare(request.problem, request.answer)
            except Exception as e:
                self._answer([request], error=e)
                return
            self._metrics.observe("cpu_stage", time.monotonic() - started)
            if isinstance(prepared, Verdict):
                if prepared.cached:
                    self._metrics.count("cache_hits")
                self._answer([request], prepared)
                return
            if self.cache is not None:
                self._metrics.count("cache_misses")
            with self._lock:
                if self._cancelled:
                    error = PoolClosedError("the evaluation pool was closed (drain=False) before this request ran")
                elif not self._actors and not self._launching:
                    error = self._starved_error()
                else:
                    error = None
                    job = self._queue.get(prepared.verdict_key)
                    if job is not None:
                        if job.state in (JobState.RUNNING, JobState.FINISHING) and \
                                not request.future.set_running_or_notify_cancel():
                            return  # cancelled meanwhile
                        self._queue.attach(job, request)
                        self._metrics.count("dedup_hits")
                    else:
                        job = Job(prepared, request)
                        self._queue.push(job)
                        self._wake.notify_all()
                    request.job = job
            if error is not None:
                self._answer([request], error=error)
        finally:
            with self._lock:
                self._preparing -= 1
                self._wake.notify_all()

    def _request_done(self, request: Request, future: concurrent.futures.Future) -> None:
        self._admission.release()
        if not future.cancelled():
            return
        self._metrics.count("cancelled")
        with self._lock:
            job = request.job
            if job is None or request not in job.requests:
                return
            job.requests.remove(request)
            if not job.requests and job.state in (JobState.QUEUED, JobState.PARKED):
                self._queue.remove(job)
