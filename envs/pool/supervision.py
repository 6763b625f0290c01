"""The pool's actors: their record (`_Actor`) and what happens when one dies: retire it, start a
replacement in the background (at most `pool.max_actor_restarts` in all), and fail what is queued once no
actor is left or starting.

A mixin of `envs.pool.core.EvaluationPool` (its state: `_lock`, `_wake`, `_actors`, `_retired`,
`_replacers`, `_launching`, `_restarts_left`, `_queue`, `_metrics`, `backend`, `settings`, `config`);
separate because actor supervision is its own job beside submission (envs/pool/submission.py) and
dispatch (envs/pool/dispatch.py).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from envs.worker.worker_set import EvaluatorError

log = logging.getLogger(__name__)


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


class ActorSupervisor:
    """Retire dead actors and replace them: a mixin of EvaluationPool."""

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
