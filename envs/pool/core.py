"""The driver side of the evaluation pool, independent of how actors are started.

    submit -> admission (backpressure) -> CPU stage (Preparer, driver threads) -> cache hit? answer
           -> dedup (attach to an identical in-flight job) or queue (priority, FIFO)
           -> dispatcher: a free actor slot -> backend.execute -> finish (reward, cache) -> answer all

A `Backend` starts actors and runs candidates on them; `RayBackend` (envs.pool.ray_backend) is the
real one, tests also use an in-process fake. Fault tolerance lives here: a request whose actor dies
is retried once on another actor and then answered with a `crash` verdict; the dead actor is
replaced in the background. Every request is answered exactly once: a Job's requests are answered
only by the thread that moves it to DONE, under the pool lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import itertools
import logging
import threading
import time
from typing import Any, Iterable, Iterator

from envs.cache import SqliteCache
from envs.evaluator import Preparer, profile_target
from envs.pool.config import PoolConfig
from envs.pool.metrics import PoolMetrics
from envs.pool.scheduler import (Admission, Job, JobQueue, JobState, PoolClosedError, PoolFullError, Request,
                                 priority_rank)
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.verdict import Status, Verdict
from envs.worker.pool import EvaluatorError
from rewards.makora import DEFAULT_DELTA

log = logging.getLogger(__name__)

__all__ = ["Backend", "EvaluationPool", "PoolClosedError", "PoolFullError"]

# CPython 3.11 builds AST objects with a recursion counter shared by all threads, so concurrent
# ast.parse/unparse can fail with "SystemError: AST constructor recursion depth mismatch"
# (python/cpython#106905). The CPU stage is mostly AST work under the GIL anyway: one at a time.
_AST_LOCK = threading.Lock()


class Backend:
    """How the pool starts actors and runs candidates on them."""

    device: str = "cpu"  # resolved: cpu | cuda

    def default_num_actors(self) -> int:
        raise NotImplementedError

    def launch(self, settings: EvalSettings) -> tuple[Any, dict]:
        """Start one actor and wait until it is ready: (handle, info). info holds at least
        `device_kind` and `workers` (its concurrency)."""
        raise NotImplementedError

    def execute(self, handle: Any, problem: Problem, solution: Any,
                baselines: dict | None) -> concurrent.futures.Future:
        """Future of (verdict, measured baselines, actor stats)."""
        raise NotImplementedError

    def profile(self, handle: Any, problem: Problem, solution: Any, calls: int) -> concurrent.futures.Future:
        """Future of the actor's profile of a candidate ({"profile": facts} or {"error": why})."""
        raise NotImplementedError

    def is_actor_failure(self, exc: BaseException) -> bool:
        """The actor itself died or became unreachable (not an error raised by the evaluation)."""
        raise NotImplementedError

    def unwrap(self, exc: BaseException) -> BaseException:
        return exc

    def kill(self, handle: Any) -> None:
        """Force-stop an actor without waiting (its in-flight futures then fail as actor failures)."""
        raise NotImplementedError

    def stats(self, handles: dict[int, Any], timeout: float) -> dict[int, dict]:
        return {}

    def shutdown(self, handles: list[Any], graceful: bool) -> None:
        """Stop actors and their worker processes; blocks until done."""
        for h in handles:
            self.kill(h)

    def close(self, infos: list[dict]) -> None:
        """Release what the backend holds (after every actor is stopped)."""

    def exporter(self, name: str) -> Any:
        return None


@dataclasses.dataclass(eq=False)
class _Actor:
    id: int
    handle: Any
    info: dict
    capacity: int
    busy: int = 0
    alive: bool = True
    killing: str | None = None  # why the pool killed it
    stats: dict = dataclasses.field(default_factory=dict)
    jobs: set = dataclasses.field(default_factory=set)


class EvaluationPool:
    """Evaluate candidates on a pool of actors; a drop-in for `envs.evaluator.Evaluator`."""

    def __init__(self, backend: Backend, settings: EvalSettings | None = None, config: PoolConfig | None = None,
                 cache: SqliteCache | None = None, delta: float = DEFAULT_DELTA):
        settings = settings or EvalSettings()
        self.config = config = config or PoolConfig()
        self.backend = backend
        self.settings = dataclasses.replace(settings, device=backend.device,
                                            workers=config.workers_per_actor or settings.workers)
        self.cache = cache
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue = JobQueue()
        self._admission = Admission(config.max_pending)
        self._seq = itertools.count()
        self._actor_ids = itertools.count()
        self._actors: dict[int, _Actor] = {}
        self._retired: list[_Actor] = []
        self._replacers: list[threading.Thread] = []
        self._launching = 0
        self._restarts_left = config.max_actor_restarts
        self._preparing = 0
        self._known_baselines: dict[str, dict] = {}
        self._closing = self._cancelled = self._stopped = False
        self._close_lock = threading.Lock()
        self._closed = False
        self.execution_timeout = config.execution_timeout or self._derived_execution_timeout()
        exporter = backend.exporter(config.name) if config.ray_metrics else None
        self._metrics = PoolMetrics(config.latency_window, exporter)

        n = config.num_actors if config.num_actors is not None else backend.default_num_actors()
        with concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="pool-launch") as starter:
            launches = [starter.submit(backend.launch, self.settings) for _ in range(n)]
        failures = [f.exception() for f in launches if f.exception() is not None]
        for f in launches:
            if f.exception() is None:
                self._add_actor(*f.result())
        kinds = sorted({a.info["device_kind"] for a in self._actors.values()})
        if failures or len(kinds) != 1:
            backend.shutdown([a.handle for a in self._actors.values()], graceful=True)
            backend.close([a.info for a in self._actors.values()])
            if failures:
                raise EvaluatorError(f"{len(failures)} of {n} evaluation actors failed to start: {failures[0]}") \
                    from failures[0]
            raise EvaluatorError(f"the evaluation actors run on different devices {kinds}; one pool needs one "
                                 "device kind (pin actors with pool.actor_resources)")
        self.preparer = Preparer(self.settings, kinds[0], cache, delta)
        self._cpu = concurrent.futures.ThreadPoolExecutor(config.cpu_stage_threads, thread_name_prefix="pool-cpu")
        self._finisher = concurrent.futures.ThreadPoolExecutor(config.finish_threads,
                                                               thread_name_prefix="pool-finish")
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="pool-dispatch", daemon=True)
        self._dispatcher.start()

    def _derived_execution_timeout(self) -> float:
        """Longest one request can legitimately take on an actor: two runs (a suspicious timing is
        measured again in a fresh worker), each with up to two worker starts and every phase, plus
        waiting for the other workers of its GPU to finish their timing and baselines."""
        t = self.settings.timeouts
        one_run = 2 * self.settings.startup_timeout + sum(t.as_dict().values())
        others = (self.settings.workers - 1) * (t.timing + t.baseline)
        return 2 * one_run + others + 60.0

    # --- properties shared with Evaluator ---------------------------------------------------------
    @property
    def device(self) -> str:
        return self.settings.device

    @property
    def device_kind(self) -> str:
        return self.preparer.device_kind

    @property
    def device_name(self) -> str:
        return self.preparer.device_name

    @property
    def size(self) -> int:
        """Candidates that can execute at once."""
        with self._lock:
            return sum(a.capacity for a in self._actors.values() if a.alive)

    def actor_infos(self, include_retired: bool = False) -> list[dict]:
        """What each live actor reported when it started (device, pid, node, reaper pid, ...); with
        include_retired, also the actors that died, were replaced, or were stopped by close()."""
        with self._lock:
            actors = [a for a in self._actors.values() if a.alive]
            if include_retired:
                actors += [a for a in self._retired if a.info]
            return [dict(a.info, id=a.id, alive=a.alive) for a in actors]

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
    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        """Per-kernel device time of an answer on one of the actors (the `profile` tool; envs.Evaluator.profile's
        contract): {"profile": facts} or {"error": why}. Not queued by priority: it takes a worker slot of the
        least busy actor at once (the dispatcher sees that slot taken until it ends). The actor's worker pool
        answers {"error": "profile needs a GPU"} on CPU actors."""
        with _AST_LOCK:
            solution = profile_target(self.preparer, problem, answer)
        if isinstance(solution, str):
            return {"error": solution}
        with self._lock:
            if self._closing:
                raise PoolClosedError("the evaluation pool is closed")
            alive = [a for a in self._actors.values() if a.alive and a.killing is None]
            if not alive:
                raise EvaluatorError("no live evaluation actor to profile on")
            actor = min(alive, key=lambda a: (a.busy / a.capacity, a.id))
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

    def _prepare(self, request: Request) -> None:
        try:
            if request.future.cancelled():
                return
            started = time.monotonic()
            try:
                with _AST_LOCK:
                    prepared = self.preparer.prepare(request.problem, request.answer)
            except Exception as e:  # the environment failed, not the candidate
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

    # --- dispatch ---------------------------------------------------------------------------------
    def _baselines(self, job: Job) -> dict | None:
        known = self._known_baselines.get(job.baseline_key)
        if known is None:
            known = self.preparer.baselines(job.candidate)
            if known:
                self._known_baselines[job.baseline_key] = known
        return known or None

    def _free_actor(self) -> _Actor | None:
        free = [a for a in self._actors.values() if a.alive and a.killing is None and a.busy < a.capacity]
        return min(free, key=lambda a: (a.busy / a.capacity, a.id)) if free else None

    def _dispatch_loop(self) -> None:
        next_check = 0.0
        while True:
            launch = None
            overdue: list[_Actor] = []
            with self._lock:
                while True:
                    if self._stopped:
                        return
                    now = time.monotonic()
                    if now >= next_check:
                        next_check = now + 1.0
                        overdue = self._overdue(now)
                        if overdue:
                            break
                    actor = self._free_actor()
                    popped = None
                    if actor is not None:
                        lookup = self._baselines if self.device == "cuda" else None
                        while popped is None:
                            popped = self._queue.pop(lookup)
                            if popped is None:
                                break
                            if not self._start(popped[0], actor):
                                popped = None  # every caller cancelled; look again
                    if popped is not None:
                        launch = (popped[0], actor, popped[1])
                        break
                    self._wake.wait(timeout=max(0.01, next_check - now))
            for actor in overdue:
                self.backend.kill(actor.handle)
            if launch is not None:
                self._execute(*launch)

    def _start(self, job: Job, actor: _Actor) -> bool:
        """Move a popped job onto an actor slot (lock held); False if nobody waits for it any more."""
        job.requests = [r for r in job.requests if r.future.running() or r.future.set_running_or_notify_cancel()]
        if not job.requests:
            self._queue.finish(job)
            return False
        now = time.monotonic()
        job.attempts += 1
        job.actor = actor
        job.dispatched = now
        job.queue_wait += now - job.enqueued
        actor.busy += 1
        actor.jobs.add(job)
        self._metrics.observe("queue_wait", now - job.enqueued)
        self._metrics.count("executions")
        return True

    def _overdue(self, now: float) -> list[_Actor]:
        out = []
        for actor in self._actors.values():
            if actor.alive and actor.killing is None and \
                    any(now - j.dispatched > self.execution_timeout for j in actor.jobs):
                actor.killing = f"a request ran longer than execution_timeout={self.execution_timeout:g} s"
                log.warning("killing evaluation actor %d: %s", actor.id, actor.killing)
                out.append(actor)
        return out

    def _execute(self, job: Job, actor: _Actor, baselines: dict | None) -> None:
        try:
            future = self.backend.execute(actor.handle, job.candidate.problem, job.candidate.solution, baselines)
        except Exception as e:  # e.g. the handle of an actor that just died
            future = concurrent.futures.Future()
            future.set_exception(e)
        future.add_done_callback(functools.partial(self._executed, job, actor))

    def _executed(self, job: Job, actor: _Actor, future: concurrent.futures.Future) -> None:
        """An execution ended (runs on the backend's callback thread: keep it short)."""
        exc = future.exception()
        action = None
        with self._lock:
            actor.busy -= 1
            actor.jobs.discard(job)
            self._wake.notify_all()
            if job.state is not JobState.RUNNING:
                return  # cancelled by close(drain=False)
            self._metrics.observe("execution", time.monotonic() - job.dispatched)
            if exc is None:
                verdict, measured, stats = future.result()
                actor.stats = stats or actor.stats
                job.state = JobState.FINISHING
                action = (verdict, measured, None)
            elif self.backend.is_actor_failure(exc):
                reason = actor.killing or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                job.failures.append(reason)
                self._actor_failed(actor, reason)
                if job.attempts < 2 and not self._cancelled:
                    self._metrics.count("retries")
                    self._queue.requeue(job)  # another actor: this one is no longer alive
                else:
                    self._metrics.count("crashes_after_retry")
                    job.state = JobState.FINISHING
                    action = (self._crash_verdict(job), None, None)
            else:
                job.state = JobState.FINISHING
                action = (None, None, self.backend.unwrap(exc))
        if action is not None:
            try:
                self._finisher.submit(self._finish, job, *action)
            except RuntimeError:  # finisher shut down (close): finish here
                self._finish(job, *action)

    def _crash_verdict(self, job: Job) -> Verdict:
        why = "; ".join(dict.fromkeys(job.failures))
        return Verdict(Status.CRASH, job.candidate.problem.id, self.device_name,
                       error=f"the evaluation process running this candidate died {job.attempts} times "
                             f"({why}); the candidate was not evaluated to completion",
                       phase_seconds={"pool_queue": job.queue_wait})

    def _finish(self, job: Job, verdict: Verdict | None, measured: dict | None, error: BaseException | None) -> None:
        if error is None:
            try:
                verdict = self.preparer.finish(job.candidate, verdict, measured, job.created)
            except Exception as e:
                verdict, error = None, e
        with self._lock:
            requests = list(job.requests)
            self._queue.finish(job)
            self._wake.notify_all()
        self._answer(requests, verdict, error, job)

    def _answer(self, requests: list[Request], verdict: Verdict | None = None, error: BaseException | None = None,
                job: Job | None = None) -> None:
        now = time.monotonic()
        for request in requests:
            if error is not None:
                self._metrics.count("errors")
                try:
                    request.future.set_exception(error)
                except concurrent.futures.InvalidStateError:
                    pass  # cancelled by its caller
                continue
            answer = verdict
            if job is not None:
                phases = {**verdict.phase_seconds, "pool_queue": job.queue_wait, "total": now - request.submitted}
                answer = dataclasses.replace(verdict, phase_seconds=phases)
            self._metrics.observe("total", now - request.submitted)
            self._metrics.verdict(answer.status)
            self._metrics.count("answered")
            try:
                request.future.set_result(answer)
            except concurrent.futures.InvalidStateError:
                pass

    # --- actors -----------------------------------------------------------------------------------
    def _add_actor(self, handle: Any, info: dict) -> _Actor:
        actor = _Actor(next(self._actor_ids), handle, info, int(info.get("workers", self.settings.workers)))
        self._actors[actor.id] = actor
        return actor

    def _actor_failed(self, actor: _Actor, reason: str) -> None:
        """Lock held. Retire the actor (once) and start a replacement in the background."""
        if not actor.alive:
            return
        actor.alive = False
        del self._actors[actor.id]
        self._retired.append(actor)
        self._metrics.count("actor_failures")
        log.warning("evaluation actor %d died (%s)", actor.id, reason)
        replace = not (self._stopped or self._cancelled) and self._restarts_left > 0  # also while draining
        if replace:
            self._restarts_left -= 1
            self._launching += 1
        thread = threading.Thread(target=self._replace, args=(actor, replace), name="pool-replace", daemon=True)
        self._replacers.append(thread)
        thread.start()

    def _replace(self, dead: _Actor, replace: bool) -> None:
        self.backend.kill(dead.handle)
        if not replace:
            self._fail_if_starved()
            return
        handle = info = None
        for attempt in range(3):
            if self._stopped or self._cancelled:
                break
            try:
                handle, info = self.backend.launch(self.settings)
                break
            except Exception as e:
                self._metrics.count("actor_start_failures")
                log.warning("replacement evaluation actor failed to start (attempt %d): %s", attempt + 1, e)
                if attempt < 2:
                    time.sleep(2.0 ** attempt)
        with self._lock:
            self._launching -= 1
            keep = handle is not None and not (self._stopped or self._cancelled)
            if keep:
                actor = self._add_actor(handle, info)
                self._metrics.count("actor_restarts")
                log.warning("evaluation actor %d replaced by actor %d", dead.id, actor.id)
                self._wake.notify_all()
        if handle is not None and not keep:
            self.backend.shutdown([handle], graceful=True)
            with self._lock:
                self._retired.append(_Actor(next(self._actor_ids), handle, info, 0, alive=False))
        self._fail_if_starved()

    def _fail_if_starved(self) -> None:
        """No actor is alive and none is starting: answer everything queued with an error."""
        with self._lock:
            if self._actors or self._launching or self._stopped:
                return
            jobs = self._queue.take_all()
        if jobs:
            log.error("no evaluation actor is left; failing %d queued requests", len(jobs))
        for job in jobs:
            self._answer(job.requests, error=self._starved_error())

    def _starved_error(self) -> EvaluatorError:
        return EvaluatorError("no evaluation actor is alive and none could be restarted "
                              f"(pool.max_actor_restarts={self.config.max_actor_restarts})")

    # --- metrics ----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Flat dict of the pool's state and history (for W&B); also refreshes exported Ray gauges."""
        with self._lock:
            handles = {a.id: a.handle for a in self._actors.values() if a.alive}
        fresh = self.backend.stats(handles, self.config.stats_timeout) if handles else {}
        with self._lock:
            for actor_id, stats in fresh.items():
                if actor_id in self._actors:
                    self._actors[actor_id].stats = stats
            busy = {f"actor_{a.id}": float(a.stats.get("busy_fraction", 0.0)) for a in self._actors.values()}
            utilization = [a.stats.get("worker_utilization", 0.0) for a in self._actors.values()]
            depth = self._queue.counts()
            depth = {"pending": self._admission.pending, "preparing": self._preparing,
                     "queued": depth["queued"], "parked": depth["parked"], "in_flight": depth["running"],
                     "finishing": depth["finishing"]}
            extra = {"actors_alive": len(self._actors), "actors_starting": self._launching,
                     "capacity": sum(a.capacity for a in self._actors.values()),
                     "worker_utilization": sum(utilization) / len(utilization) if utilization else 0.0}
        return self._metrics.snapshot(depth, busy, extra)

    # --- shutdown ---------------------------------------------------------------------------------
    def close(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop the pool. drain=True answers everything already submitted first (for at most
        `timeout` seconds, then as drain=False); drain=False answers unfinished requests with
        PoolClosedError. Stops every actor and worker process; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
            self._admission.close()
            if drain and not self._admission.wait_idle(timeout):
                log.warning("evaluation pool did not drain within %s s; cancelling the rest", timeout)
                drain = False
            if not drain:
                self._cancel_all()
            with self._lock:
                self._stopped = True
                self._wake.notify_all()
            self._dispatcher.join()
            self._cpu.shutdown(wait=True)
            for thread in list(self._replacers):
                thread.join()
            with self._lock:
                handles = [a.handle for a in self._actors.values()]
                for actor in self._actors.values():
                    actor.alive = False
                    self._retired.append(actor)
                self._actors.clear()
                infos = [a.info for a in self._retired if a.info]
            self.backend.shutdown(handles, graceful=True)
            self._finisher.shutdown(wait=True)
            if not self._admission.wait_idle(timeout=5):
                log.error("%d requests were still unanswered after close", self._admission.pending)
            self.backend.close(infos)
            self._closed = True

    shutdown = close

    def _cancel_all(self) -> None:
        with self._lock:
            self._cancelled = True
            jobs = self._queue.take_all()
            for actor in self._actors.values():
                for job in actor.jobs:
                    if job.state is JobState.RUNNING:
                        job.state = JobState.DONE
                        self._queue.finish(job)
                        jobs.append(job)
        error = PoolClosedError("the evaluation pool was closed (drain=False) before this request was answered")
        for job in jobs:
            self._answer(job.requests, error=error)

    def __enter__(self) -> EvaluationPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
