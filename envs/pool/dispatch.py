"""Dispatch: from the queue onto a free actor slot, through the backend, to the answer.

The dispatcher owns the job queue. Its thread pops the next job (priority, FIFO; on CUDA only once its baselines
are known) for the least busy live actor, kills actors whose requests overrun `execution_timeout`, and hands each
finished execution to its finisher threads: the cache and the judge (`CpuStage.finish`), or a retry on another
actor when the actor died (once; then a `crash` verdict).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time

from envs.cpu_stage import Candidate, CpuStage
from envs.guard import failure_of
from envs.pool.backend import Backend
from envs.pool.metrics import PoolMetrics
from envs.pool.replies import Replies
from envs.pool.scheduler import Job, JobQueue, JobState, Lifecycle, Request
from envs.pool.supervision import ActorRecord, ActorSupervisor
from envs.verdict import Status, Verdict

log = logging.getLogger(__name__)


class Dispatcher:
    """Methods marked 'lock held' expect the pool's lock (`wake`'s), shared with the actor supervisor."""

    def __init__(
        self,
        backend: Backend,
        cpu_stage: CpuStage,
        actors: ActorSupervisor,
        wake: threading.Condition,
        lifecycle: Lifecycle,
        metrics: PoolMetrics,
        replies: Replies,
        queue: JobQueue,
        execution_timeout: float,
        finish_threads: int,
    ):
        self._backend, self._cpu_stage, self._actors = backend, cpu_stage, actors
        self._wake, self._lifecycle, self._metrics, self._replies = wake, lifecycle, metrics, replies
        self._queue = queue
        self.execution_timeout = execution_timeout
        self._known_baselines: dict[str, dict] = {}
        self._finisher = concurrent.futures.ThreadPoolExecutor(finish_threads, thread_name_prefix="pool-finish")
        self._thread = threading.Thread(target=self._loop, name="pool-dispatch", daemon=True)
        self._thread.start()

    # --- what the other components ask (lock held) -------------------------------------------------
    def enqueue(self, request: Request, candidate: Candidate) -> bool:
        """Attach the request to an identical job in flight, or queue a new job; False if the request was
        cancelled meanwhile (nothing done)."""
        job = self._queue.get(candidate.verdict_key)
        if job is not None:
            if (
                job.state in (JobState.RUNNING, JobState.FINISHING)
                and not request.future.set_running_or_notify_cancel()
            ):
                return False
            self._queue.attach(job, request)
            self._metrics.count("dedup_hits")
        else:
            job = Job(candidate, request)
            self._queue.push(job)
            self._wake.notify_all()
        request.job = job
        return True

    def withdraw(self, request: Request) -> None:
        """The request was cancelled: detach it; a queued job nobody waits for any more is dropped."""
        job = request.job
        if job is None or request not in job.requests:
            return
        job.requests.remove(request)
        if not job.requests and job.state in (JobState.QUEUED, JobState.PARKED):
            self._queue.remove(job)

    def take_queued(self) -> list[Job]:
        """Every queued or parked job, removed (to be answered by the caller)."""
        return self._queue.take_all()

    def take_unfinished(self) -> list[Job]:
        """close(drain=False): every queued, parked or running job, removed; executions still under way are
        ignored when they end."""
        jobs = self._queue.take_all()
        for actor in self._actors.live():
            for job in actor.jobs:
                if job.state is JobState.RUNNING:
                    job.state = JobState.DONE
                    self._queue.finish(job)
                    jobs.append(job)
        return jobs

    def counts(self) -> dict[str, int]:
        return self._queue.counts()

    # --- the dispatcher thread --------------------------------------------------------------------
    def _baselines(self, job: Job) -> dict | None:
        known = self._known_baselines.get(job.baseline_key)
        if known is None:
            known = self._cpu_stage.baselines(job.candidate)
            if known:
                self._known_baselines[job.baseline_key] = known
        return known or None

    def _loop(self) -> None:
        next_check = 0.0
        lookup = self._baselines if self._cpu_stage.device == "cuda" else None
        while True:
            launch = None
            overdue: list[ActorRecord] = []
            with self._wake:
                while True:
                    if self._lifecycle.stopped:
                        return
                    now = time.monotonic()
                    if now >= next_check:
                        next_check = now + 1.0
                        overdue = self._actors.overdue(now, self.execution_timeout)
                        if overdue:
                            break
                    actor = self._actors.free()
                    popped = None
                    if actor is not None:
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
                self._backend.kill(actor.handle)
            if launch is not None:
                self._execute(*launch)

    def _start(self, job: Job, actor: ActorRecord) -> bool:
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

    def _execute(self, job: Job, actor: ActorRecord, baselines: dict | None) -> None:
        try:
            future = self._backend.execute(actor.handle, job.candidate.problem, job.candidate.solution, baselines)
        except Exception as e:  # e.g. the handle of an actor that just died
            future = concurrent.futures.Future()
            future.set_exception(e)
        future.add_done_callback(functools.partial(self._executed, job, actor))

    def _executed(self, job: Job, actor: ActorRecord, future: concurrent.futures.Future) -> None:
        """An execution ended (runs on the backend's callback thread: keep it short)."""
        exc = future.exception()
        action = None
        with self._wake:
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
            elif self._backend.is_actor_failure(exc):
                reason = actor.killing or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                job.failures.append(reason)
                self._actors.failed(actor, reason)
                if job.attempts < 2 and not self._lifecycle.cancelled:
                    self._metrics.count("retries")
                    self._queue.requeue(job)  # another actor: this one is no longer alive
                else:
                    self._metrics.count("crashes_after_retry")
                    job.state = JobState.FINISHING
                    action = (self._crash_verdict(job), None, None)
            else:  # the actor lives but failed on this candidate: the candidate's verdict, not the caller's error
                job.state = JobState.FINISHING
                failure = failure_of("execute", self._backend.unwrap(exc))
                action = (failure.verdict(job.candidate.problem.id, self._cpu_stage.device_name), None, None)
        if action is not None:
            try:
                self._finisher.submit(self._finish, job, *action)
            except RuntimeError:  # finisher shut down (close): finish here
                self._finish(job, *action)

    def _crash_verdict(self, job: Job) -> Verdict:
        why = "; ".join(dict.fromkeys(job.failures))
        return Verdict(
            Status.CRASH,
            job.candidate.problem.id,
            self._cpu_stage.device_name,
            error=f"the evaluation process running this candidate died {job.attempts} times "
            f"({why}); the candidate was not evaluated to completion",
            phase_seconds={"pool_queue": job.queue_wait},
        )

    def _finish(self, job: Job, verdict: Verdict | None, measured: dict | None, error: BaseException | None) -> None:
        if error is None:
            verdict = self._cpu_stage.finish(job.candidate, verdict, measured, job.created)
        with self._wake:
            requests = list(job.requests)
            self._queue.finish(job)
            self._wake.notify_all()
        self._replies.send(requests, verdict, error, job)

    # --- close ------------------------------------------------------------------------------------
    def join(self) -> None:
        """Wait for the dispatcher thread (after the lifecycle says stopped)."""
        self._thread.join()

    def shutdown_finisher(self) -> None:
        """Finish what is being finished; later executions finish on their callback thread."""
        self._finisher.shutdown(wait=True)
