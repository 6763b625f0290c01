"""Dispatch: from the queue onto a free actor slot, through the backend, to the answer.

The dispatcher thread pops the next job (priority, FIFO; on CUDA only once its baselines are known) for the
least busy live actor, kills actors whose requests overrun `execution_timeout`, and hands each finished
execution to the finisher threads: the cache and the judge (`CpuStage.finish`), or a retry on another actor
when the actor died (once; then a `crash` verdict). `_answer` is where every request is answered, exactly
once: only by the thread that moved its job to DONE.

A mixin of `envs.pool.core.EvaluationPool` (its state: `_lock`, `_wake`, `_queue`, `_actors`,
`_known_baselines`, `_finisher`, `_metrics`, `_stopped`, `_cancelled`, `preparer`, `backend`,
`execution_timeout`); separate from submission (envs/pool/submission.py) and actor supervision
(envs/pool/supervision.py).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import time

from envs.guard import failure_of
from envs.pool.scheduler import Job, JobState, Request
from envs.pool.supervision import _Actor
from envs.verdict import Status, Verdict

log = logging.getLogger(__name__)


class DispatchStage:
    """From the queue onto an actor and back to the callers: a mixin of EvaluationPool."""

    def _baselines(self, job: Job) -> dict | None:
        known = self._known_baselines.get(job.baseline_key)
        if known is None:
            known = self.cpu_stage.baselines(job.candidate)
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
            else:  # the actor lives but failed on this candidate: the candidate's verdict, not the caller's error
                job.state = JobState.FINISHING
                failure = failure_of("execute", self.backend.unwrap(exc))
                action = (failure.verdict(job.candidate.problem.id, self.device_name), None, None)
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
            verdict = self.cpu_stage.finish(job.candidate, verdict, measured, job.created)
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
