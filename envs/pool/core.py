"""The driver side of the evaluation pool, independent of how actors are started.

    submit -> admission (backpressure) -> CPU stage (CpuStage, driver threads) -> cache hit? answer
           -> dedup (attach to an identical in-flight job) or queue (priority, FIFO)
           -> dispatcher: a free actor slot -> backend.execute -> finish (cache, judge) -> answer all

A `Backend` (envs/pool/backend.py) starts actors and runs candidates on them; `RayBackend`
(envs.pool.ray_backend) is the real one, tests also use an in-process fake. Fault tolerance: a
request whose actor dies is retried once on another actor and then answered with a `crash` verdict;
the dead actor is replaced in the background. Every request is answered exactly once: a Job's
requests are answered only by the thread that moves it to DONE, under the pool lock.

This module holds the pool's state, its start, `profile`, `metrics` and `close`; the stages are mixins of
their own: submission and the CPU stage (envs/pool/submission.py), dispatch and answering
(envs/pool/dispatch.py), actor failure and replacement (envs/pool/supervision.py).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import threading
from typing import Any

from envs.cache import SqliteCache
from envs.evaluator import CpuStage, profile_target
from envs.pool.backend import Backend
from envs.pool.config import PoolConfig
from envs.pool.dispatch import DispatchStage
from envs.pool.metrics import PoolMetrics
from envs.pool.scheduler import Admission, JobQueue, JobState, PoolClosedError, PoolFullError
from envs.pool.submission import SubmissionStage
from envs.pool.supervision import _Actor, ActorSupervisor
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.worker.worker_set import EvaluatorError

log = logging.getLogger(__name__)

__all__ = ["Backend", "EvaluationPool", "PoolClosedError", "PoolFullError"]


class EvaluationPool(SubmissionStage, DispatchStage, ActorSupervisor):
    """Evaluate candidates on a pool of actors; a drop-in for `envs.evaluator.Evaluator`."""

    def __init__(self, backend: Backend, settings: EvalSettings | None = None, config: PoolConfig | None = None,
                 cache: SqliteCache | None = None):
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
        self.cpu_stage = CpuStage(self.settings, kinds[0], cache)
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
        return self.cpu_stage.device_kind

    @property
    def device_name(self) -> str:
        return self.cpu_stage.device_name

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

    # --- profile (the `profile` tool) -------------------------------------------------------------
    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        """Per-kernel device time of an answer on one of the actors (the `profile` tool; envs.Evaluator.profile's
        contract): {"profile": facts} or {"error": why}. Not queued by priority: it takes a worker slot of the
        least busy actor at once (the dispatcher sees that slot taken until it ends). The actor's worker pool
        answers {"error": "profile needs a GPU"} on CPU actors."""
        solution = profile_target(self.cpu_stage, problem, answer)
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
