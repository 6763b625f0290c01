"""The pool's actors: their records, their start, and what happens when one dies: retire it, start a
replacement in the background (at most `pool.max_actor_restarts` in all), and fail what is queued once no
actor is left or starting.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import threading
import time
from typing import Any, Callable

from envs.pool.backend import Backend
from envs.pool.config import PoolConfig
from envs.pool.metrics import PoolMetrics
from envs.pool.replies import Replies
from envs.pool.scheduler import Job, Lifecycle
from envs.settings import EvalSettings
from envs.worker.worker_set import EvaluatorError

log = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class ActorRecord:
    id: int
    handle: Any
    info: dict
    capacity: int
    busy: int = 0
    alive: bool = True
    killing: str | None = None  # why the pool killed it
    stats: dict = dataclasses.field(default_factory=dict)
    jobs: set = dataclasses.field(default_factory=set)


class ActorSupervisor:
    """Owns the actor table. Methods marked 'lock held' expect the pool's lock (`wake`'s), which it shares
    with the dispatcher because one decision (a free slot for the next job) spans both."""

    def __init__(
        self,
        backend: Backend,
        settings: EvalSettings,
        config: PoolConfig,
        wake: threading.Condition,
        lifecycle: Lifecycle,
        metrics: PoolMetrics,
        replies: Replies,
        take_queued: Callable[[], list[Job]],
    ):
        self._backend, self._settings, self._config = backend, settings, config
        self._wake, self._lifecycle, self._metrics, self._replies = wake, lifecycle, metrics, replies
        self._take_queued = take_queued  # lock held: every queued or parked job, removed
        self._ids = itertools.count()
        self._actors: dict[int, ActorRecord] = {}
        self._retired: list[ActorRecord] = []
        self._replacers: list[threading.Thread] = []
        self.launching = 0
        self._restarts_left = config.max_actor_restarts

    # --- start ------------------------------------------------------------------------------------
    def start(self, n: int) -> str:
        """Start `n` actors at once; their device kind. All or nothing: EvaluatorError (none left running)
        when one fails or they run on different devices."""
        with concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="pool-launch") as starter:
            launches = [starter.submit(self._backend.launch, self._settings) for _ in range(n)]
        failures = [f.exception() for f in launches if f.exception() is not None]
        for f in launches:
            if f.exception() is None:
                self._add(*f.result())
        kinds = sorted({a.info["device_kind"] for a in self._actors.values()})
        if failures or len(kinds) != 1:
            self._backend.shutdown([a.handle for a in self._actors.values()], graceful=True)
            self._backend.close([a.info for a in self._actors.values()])
            if failures:
                raise EvaluatorError(
                    f"{len(failures)} of {n} evaluation actors failed to start: {failures[0]}"
                ) from failures[0]
            raise EvaluatorError(
                f"the evaluation actors run on different devices {kinds}; one pool needs one "
                "device kind (pin actors with pool.actor_resources)"
            )
        return kinds[0]

    def _add(self, handle: Any, info: dict) -> ActorRecord:
        actor = ActorRecord(next(self._ids), handle, info, int(info.get("workers", self._settings.workers)))
        self._actors[actor.id] = actor
        return actor

    # --- what the other components ask (lock held) -------------------------------------------------
    def live(self) -> list[ActorRecord]:
        return [a for a in self._actors.values() if a.alive]

    def free(self) -> ActorRecord | None:
        """The least busy live actor with a free slot."""
        free = [a for a in self._actors.values() if a.alive and a.killing is None and a.busy < a.capacity]
        return min(free, key=lambda a: (a.busy / a.capacity, a.id)) if free else None

    def least_busy(self) -> ActorRecord | None:
        """The least busy live actor, full or not (profile takes a slot beyond the dispatcher's)."""
        alive = [a for a in self._actors.values() if a.alive and a.killing is None]
        return min(alive, key=lambda a: (a.busy / a.capacity, a.id)) if alive else None

    def none_left(self) -> bool:
        """No actor is alive and none is starting: nothing queued now can ever run."""
        return not self._actors and not self.launching

    def overdue(self, now: float, timeout: float) -> list[ActorRecord]:
        """Mark (once) the actors running a request longer than `timeout`; the caller kills them."""
        out = []
        for actor in self._actors.values():
            if actor.alive and actor.killing is None and any(now - j.dispatched > timeout for j in actor.jobs):
                actor.killing = f"a request ran longer than execution_timeout={timeout:g} s"
                log.warning("killing evaluation actor %d: %s", actor.id, actor.killing)
                out.append(actor)
        return out

    def handle(self, actor_id: int) -> Any:
        return self._actors[actor_id].handle

    def infos(self, include_retired: bool = False) -> list[dict]:
        actors = self.live()
        if include_retired:
            actors += [a for a in self._retired if a.info]
        return [dict(a.info, id=a.id, alive=a.alive) for a in actors]

    def refresh_stats(self, fresh: dict[int, dict]) -> dict[str, Any]:
        """Store the actors' latest busy statistics; the pool's gauges of them."""
        for actor_id, stats in fresh.items():
            if actor_id in self._actors:
                self._actors[actor_id].stats = stats
        actors = list(self._actors.values())
        utilization = [a.stats.get("worker_utilization", 0.0) for a in actors]
        return {
            "busy": {f"actor_{a.id}": float(a.stats.get("busy_fraction", 0.0)) for a in actors},
            "actors_alive": len(actors),
            "actors_starting": self.launching,
            "capacity": sum(a.capacity for a in actors),
            "worker_utilization": sum(utilization) / len(utilization) if utilization else 0.0,
            # the live actors' retries of the environment's out-of-memory errors (envs/worker/oom.py)
            "oom_retries": sum(int(a.stats.get("oom_retries", 0)) for a in actors),
            "oom_failures": sum(int(a.stats.get("oom_failures", 0)) for a in actors),
            # ... and how often they answered by running fewer evaluations on a GPU at once
            "gpu_concurrency_cuts": sum(int(a.stats.get("gpu_concurrency_cuts", 0)) for a in actors),
            "worker_replacements": sum(int(a.stats.get("worker_replacements", 0)) for a in actors),
        }

    # --- failure and replacement ------------------------------------------------------------------
    def failed(self, actor: ActorRecord, reason: str) -> None:
        """Lock held. Retire the actor (once) and start a replacement in the background."""
        if not actor.alive:
            return
        actor.alive = False
        del self._actors[actor.id]
        self._retired.append(actor)
        self._metrics.count("actor_failures")
        log.warning("evaluation actor %d died (%s)", actor.id, reason)
        replace = not self._lifecycle.ending and self._restarts_left > 0  # also while draining
        if replace:
            self._restarts_left -= 1
            self.launching += 1
        thread = threading.Thread(target=self._replace, args=(actor, replace), name="pool-replace", daemon=True)
        self._replacers.append(thread)
        thread.start()

    def _replace(self, dead: ActorRecord, replace: bool) -> None:
        self._backend.kill(dead.handle)
        if not replace:
            self._fail_if_starved()
            return
        handle = info = None
        for attempt in range(3):
            if self._lifecycle.ending:
                break
            try:
                handle, info = self._backend.launch(self._settings)
                break
            except Exception as e:
                self._metrics.count("actor_start_failures")
                log.warning("replacement evaluation actor failed to start (attempt %d): %s", attempt + 1, e)
                if attempt < 2:
                    time.sleep(2.0**attempt)
        with self._wake:
            self.launching -= 1
            keep = handle is not None and not self._lifecycle.ending
            if keep:
                actor = self._add(handle, info)
                self._metrics.count("actor_restarts")
                log.warning("evaluation actor %d replaced by actor %d", dead.id, actor.id)
                self._wake.notify_all()
        if handle is not None and not keep:
            self._backend.shutdown([handle], graceful=True)
            with self._wake:
                self._retired.append(ActorRecord(next(self._ids), handle, info, 0, alive=False))
        self._fail_if_starved()

    def _fail_if_starved(self) -> None:
        """No actor is alive and none is starting: answer everything queued with an error."""
        with self._wake:
            if self._actors or self.launching or self._lifecycle.stopped:
                return
            jobs = self._take_queued()
        if jobs:
            log.error("no evaluation actor is left; failing %d queued requests", len(jobs))
        for job in jobs:
            self._replies.send(job.requests, error=self.starved_error())

    def starved_error(self) -> EvaluatorError:
        return EvaluatorError(
            "no evaluation actor is alive and none could be restarted "
            f"(pool.max_actor_restarts={self._config.max_actor_restarts})"
        )

    # --- close ------------------------------------------------------------------------------------
    def retire_all(self) -> tuple[list[Any], list[dict]]:
        """After the dispatcher stopped: wait for replacements in progress, retire every actor; (the handles
        to stop, the infos of every actor the pool ever ran, for the backend's close)."""
        for thread in list(self._replacers):
            thread.join()
        with self._wake:
            handles = [a.handle for a in self._actors.values()]
            for actor in self._actors.values():
                actor.alive = False
                self._retired.append(actor)
            self._actors.clear()
            return handles, [a.info for a in self._retired if a.info]
