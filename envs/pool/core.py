"""The driver side of the evaluation pool, independent of how actors are started.

    submit -> Admission (backpressure) -> Intake: CpuStage on a driver thread -> cache hit? answer
           -> Dispatcher: dedup (attach to an identical in-flight job) or queue (priority, FIFO)
           -> a free slot of an actor (ActorSupervisor) -> backend.execute -> finish (cache, judge) -> Replies

`EvaluationPool` builds these components and wires them; each owns its state (envs/pool/README.md says who calls
whom, in which thread or process). A request whose actor dies is retried once on another actor and then answered
with a `crash` verdict; the dead actor is replaced in the background. Every request is answered exactly once: a
Job's requests are answered only by the thread that moves it to DONE, under the pool lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import threading
import time
from typing import Any, Iterable, Iterator

from envs.cache import SqliteCache
from envs.cpu_stage import CpuStage, profile_target
from envs.pool.backend import Backend
from envs.pool.config import PoolConfig
from envs.pool.dispatch import Dispatcher
from envs.pool.intake import Intake
from envs.pool.metrics import PoolMetrics
from envs.pool.replies import Replies
from envs.pool.scheduler import Admission, JobQueue, Lifecycle, PoolClosedError, PoolFullError, priority_rank
from envs.pool.supervision import ActorSupervisor
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.verdict import Verdict
from envs.worker.worker_set import EvaluatorError

log = logging.getLogger(__name__)

__all__ = ["Backend", "EvaluationPool", "PoolClosedError", "PoolFullError"]


class EvaluationPool:
    """Evaluate candidates on a pool of actors; a drop-in for `envs.evaluator.Evaluator` and a
    `envs.kernel_evaluator.KernelEvaluator`."""

    def __init__(
        self,
        backend: Backend,
        settings: EvalSettings | None = None,
        config: PoolConfig | None = None,
        cache: SqliteCache | None = None,
    ):
        settings = settings or EvalSettings()
        self.config = config = config or PoolConfig()
        self.backend = backend
        self.settings = dataclasses.replace(
            settings,
            device=backend.device,
            workers=config.workers_per_actor or settings.workers,
            gpu_share=config.gpus_per_actor if backend.device == "cuda" else settings.gpu_share,
        )
        self.cache = cache
        # One lock for the queue and the actor table: the dispatcher's decision (next job, free slot) spans both.
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._lifecycle = Lifecycle()
        self._close_lock = threading.Lock()
        self._closed = False
        self.execution_timeout = config.execution_timeout or self._derived_execution_timeout()
        exporter = backend.exporter(config.name) if config.ray_metrics else None
        self._metrics = PoolMetrics(config.latency_window, exporter)
        self._replies = Replies(self._metrics)
        self.admission = Admission(config.max_pending)
        queue = JobQueue()
        self.actors = ActorSupervisor(
            backend,
            self.settings,
            config,
            self._wake,
            self._lifecycle,
            self._metrics,
            self._replies,
            take_queued=queue.take_all,
        )
        n = config.num_actors if config.num_actors is not None else backend.default_num_actors()
        device_kind = self.actors.start(n)
        self.cpu_stage = CpuStage(self.settings, device_kind, cache)
        self.dispatcher = Dispatcher(
            backend,
            self.cpu_stage,
            self.actors,
            self._wake,
            self._lifecycle,
            self._metrics,
            self._replies,
            queue,
            self.execution_timeout,
            config.finish_threads,
        )
        self.intake = Intake(
            self.cpu_stage,
            self.admission,
            self.dispatcher,
            self.actors,
            self._wake,
            self._lifecycle,
            self._metrics,
            self._replies,
            config.cpu_stage_threads,
            cache_enabled=cache is not None,
        )

    def _derived_execution_timeout(self) -> float:
        """Longest one request can legitimately take on an actor: two runs (a suspicious timing is
        measured again in a fresh worker), each with up to two worker starts and every phase, and each
        run again up to `oom_retries` times after its backoffs when the GPU was full of other processes
        (envs/worker/oom.py); and as long again for each other worker of its GPU, whose requests may run
        one at a time before it once the GPU ran out of memory (envs/worker/gpu_concurrency.py)."""
        s = self.settings
        one_run = 2 * s.startup_timeout + sum(s.timeouts.as_dict().values())
        backoffs = s.oom_backoff_s * (2**s.oom_retries - 1)
        one_request = 2 * ((1 + s.oom_retries) * one_run + backoffs)
        return s.workers * one_request + 60.0

    # --- properties shared with Evaluator ---------------------------------------------------------
    @property
    def device(self) -> str:
        return self.settings.device

    @property
    def device_kind(self) -> str:
        return self.cpu_stage.device_kind

    @property
    def device_name(self) -> str:
        return self.cpu_stage.device_name

    @property
    def size(self) -> int:
        """Candidates that can execute at once."""
        with self._lock:
            return sum(a.capacity for a in self.actors.live())

    def actor_infos(self, include_retired: bool = False) -> list[dict]:
        """What each live actor reported when it started (device, pid, node, reaper pid, ...); with
        include_retired, also the actors that died, were replaced, or were stopped by close()."""
        with self._lock:
            return self.actors.infos(include_retired)

    # --- submission -------------------------------------------------------------------------------
    def submit(
        self, problem: Problem, answer: str, priority: str = "train", block: bool = True, timeout: float | None = None
    ) -> concurrent.futures.Future:
        """Queue one evaluation; a Future of its Verdict. Blocks while `max_pending` requests are
        unanswered (block=False: raise PoolFullError at once; timeout: after that many seconds)."""
        rank = priority_rank(priority)
        if self._lifecycle.closing:
            raise PoolClosedError("the evaluation pool is closed")
        self.admission.acquire(1, block, timeout)
        return self.intake.accept(problem, answer, rank)

    def submit_batch(
        self,
        items: Iterable[tuple[Problem, str]],
        priority: str = "train",
        block: bool = True,
        timeout: float | None = None,
    ) -> list[concurrent.futures.Future]:
        """Queue several evaluations in order. block=False admits all or none."""
        items = list(items)
        rank = priority_rank(priority)
        if self._lifecycle.closing:
            raise PoolClosedError("the evaluation pool is closed")
        if not block:
            if items:
                self.admission.acquire(len(items), block=False)
            futures = []
            for i, (p, a) in enumerate(items):
                try:
                    futures.append(self.intake.accept(p, a, rank))
                except BaseException:
                    self.admission.release(len(items) - i - 1)  # accept released its own
                    raise
            return futures
        futures = []
        deadline = None if timeout is None else time.monotonic() + timeout
        for p, a in items:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.admission.acquire(1, True, remaining)
            futures.append(self.intake.accept(p, a, rank))
        return futures

    def prepare_baselines(
        self, problems: Iterable[Problem], priority: str = "baseline"
    ) -> list[concurrent.futures.Future]:
        """Queue the measurement of each problem's baselines ahead of its candidates (CUDA; known ones are
        skipped), one job per problem spread over the actors, in the given order. A candidate of a problem whose
        job has not ended waits for it instead of measuring again, and lends it its priority when the job's is
        lower: at the default `baseline`, below every candidate, the jobs only use slots no candidate is queued
        for. Futures of Verdicts: `correct` when the reference ran."""
        rank = priority_rank(priority)
        futures = []
        for problem in problems:
            job = self.cpu_stage.baseline_job(problem)
            if job is not None:
                self.admission.acquire(1, True, None)
                futures.append(self.intake.accept_job(job, rank))
        return futures

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        """Awaitable evaluation; waits for room without blocking the event loop."""
        try:
            future = self.submit(problem, answer, priority, block=False)
        except PoolFullError:
            loop = asyncio.get_running_loop()
            future = await loop.run_in_executor(None, functools.partial(self.submit, problem, answer, priority))
        return await asyncio.wrap_future(future)

    def evaluate(
        self, problem: Problem, answer: str, priority: str = "train", block: bool = True, timeout: float | None = None
    ) -> Verdict:
        """Evaluate one answer and wait for its Verdict (like Evaluator.evaluate). `block`/`timeout`
        apply to admission only (see submit): a full pool raises PoolFullError when block=False."""
        return self.submit(problem, answer, priority, block, timeout).result()

    def iter_evaluate(
        self,
        items: Iterable[tuple[Problem, str]],
        progress: bool = False,
        desc: str = "evaluating",
        priority: str = "train",
    ) -> Iterator[Verdict]:
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

    def evaluate_many(
        self,
        items: Iterable[tuple[Problem, str]],
        progress: bool = False,
        desc: str = "evaluating",
        priority: str = "train",
    ) -> list[Verdict]:
        return list(self.iter_evaluate(items, progress, desc, priority))

    # --- profile (the `profile` tool) -------------------------------------------------------------
    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        """Per-kernel device time of an answer on one of the actors (the `profile` tool; envs.Evaluator.profile's
        contract): {"profile": facts} or {"error": why}. Not queued by priority: it takes a worker slot of the
        least busy actor at once (the dispatcher sees that slot taken until it ends). The actor's worker set
        answers {"error": "profile needs a GPU"} on CPU actors."""
        solution = profile_target(self.cpu_stage, problem, answer)
        if isinstance(solution, str):
            return {"error": solution}
        with self._lock:
            if self._lifecycle.closing:
                raise PoolClosedError("the evaluation pool is closed")
            actor = self.actors.least_busy()
            if actor is None:
                raise EvaluatorError("no live evaluation actor to profile on")
            actor.busy += 1
        try:
            return self.backend.profile(actor.handle, problem, solution, calls).result(timeout=self.execution_timeout)
        except concurrent.futures.TimeoutError:
            return {"error": f"profiling took longer than {self.execution_timeout:g} s"}
        except Exception as e:
            if self.backend.is_actor_failure(e):
                return {"error": "the evaluation actor died while profiling"}
            raise self.backend.unwrap(e) from None
        finally:
            with self._lock:
                actor.busy -= 1
                self._wake.notify_all()

    # --- metrics ----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Flat dict of the pool's state and history (for W&B); also refreshes exported Ray gauges."""
        with self._lock:
            handles = {a.id: a.handle for a in self.actors.live()}
        fresh = self.backend.stats(handles, self.config.stats_timeout) if handles else {}
        with self._lock:
            actors = self.actors.refresh_stats(fresh)
            counts = self.dispatcher.counts()
            depth = {
                "pending": self.admission.pending,
                "preparing": self.intake.preparing,
                "queued": counts["queued"],
                "parked": counts["parked"],
                "in_flight": counts["running"],
                "finishing": counts["finishing"],
            }
        busy = actors.pop("busy")
        return self._metrics.snapshot(depth, busy, actors)

    # --- shutdown ---------------------------------------------------------------------------------
    def close(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop the pool. drain=True answers everything already submitted first (for at most
        `timeout` seconds, then as drain=False); drain=False answers unfinished requests with
        PoolClosedError. Stops every actor and worker process; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._lifecycle.closing = True
            self.admission.close()
            if drain and not self.admission.wait_idle(timeout):
                log.warning("evaluation pool did not drain within %s s; cancelling the rest", timeout)
                drain = False
            if not drain:
                self._cancel_all()
            with self._lock:
                self._lifecycle.stopped = True
                self._wake.notify_all()
            self.dispatcher.join()
            self.intake.shutdown()
            handles, infos = self.actors.retire_all()
            self.backend.shutdown(handles, graceful=True)
            self.dispatcher.shutdown_finisher()
            if not self.admission.wait_idle(timeout=5):
                log.error("%d requests were still unanswered after close", self.admission.pending)
            self.backend.close(infos)
            self._closed = True

    shutdown = close

    def _cancel_all(self) -> None:
        with self._lock:
            self._lifecycle.cancelled = True
            jobs = self.dispatcher.take_unfinished()
        error = PoolClosedError("the evaluation pool was closed (drain=False) before this request was answered")
        for job in jobs:
            self._replies.send(job.requests, error=error)

    def __enter__(self) -> EvaluationPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
