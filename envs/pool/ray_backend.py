"""The evaluation pool on Ray: `RayEvaluationPool` and the backend that manages its actors."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from typing import Any, Callable

import psutil
import ray
import ray.exceptions

from envs.cache import SqliteCache
from envs.pool.config import PoolConfig
from envs.pool.core import Backend, EvaluationPool
from envs.pool.metrics import RayExporter
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.worker.worker_set import EvaluatorError

log = logging.getLogger(__name__)


def actors_on_free_gpus(free_gpus: float, leave_gpus: float, gpus_per_actor: float) -> int:
    """How many evaluation actors of `gpus_per_actor` each fit in the cluster's free GPUs once `leave_gpus` (what
    actors started after the pool will ask for) are set aside; an EvaluatorError saying what to change when none do."""
    n = int((free_gpus - leave_gpus) / gpus_per_actor + 1e-9)  # 0.1 + 0.2: a float sum just under a whole number
    if n < 1:
        raise EvaluatorError(
            f"no GPU left for the evaluation pool: the cluster has {free_gpus:g} free, {leave_gpus:g} go to the "
            f"learner and rollout engines and an evaluation actor takes {gpus_per_actor:g}; share GPUs with "
            "fractions (e.g. pool.gpus_per_actor=0.25 policy.learner.actor.num_gpus=0.5 policy.engine.num_gpus=0.25) "
            "or set pool.num_actors"
        )
    return n


def settled_free_gpus(window_s: float = 1.0, every_s: float = 0.05) -> float:
    """The cluster's free GPUs, read as the least over `window_s`: Ray's view of what is free trails the raylets
    (an actor that has just answered can still read as free for tens of milliseconds), and a pool sized on such a
    read waits for a GPU that never comes. The least errs towards a smaller pool, never a stuck one."""
    deadline = time.monotonic() + window_s
    free = float(ray.available_resources().get("GPU", 0.0))
    while time.monotonic() < deadline:
        time.sleep(every_s)
        free = min(free, float(ray.available_resources().get("GPU", 0.0)))
    return free


class RayBackend(Backend):
    def __init__(self, settings: EvalSettings, config: PoolConfig, reserve: Callable[[], float] | None = None):
        self.config = config
        self.owns_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = dict(config.init_kwargs)
            if config.address:
                kwargs["address"] = config.address
            if config.namespace:
                kwargs["namespace"] = config.namespace
            if config.runtime_env:
                kwargs["runtime_env"] = config.runtime_env
            ray.init(**kwargs)
            self.owns_ray = True
        try:
            gpus = int(ray.cluster_resources().get("GPU", 0))
            if settings.device == "auto":
                self.device = "cuda" if gpus else "cpu"
            else:
                self.device = settings.device
            if self.device == "cuda" and not gpus:
                raise EvaluatorError("device=cuda but the Ray cluster has no GPU")
            self._gpus = gpus
            if reserve is not None and self.device == "cuda":  # what the run's other actors will ask for
                self.config = dataclasses.replace(config, leave_gpus=config.leave_gpus + reserve())
            self._node_id = ray.get_runtime_context().get_node_id()
        except BaseException:
            self.close([])
            raise

    def default_num_actors(self) -> int:
        if self.device != "cuda":
            return 2
        # Free, not total: an engine started before the pool (benchmark, agent) or another job already holds some.
        free = settled_free_gpus()
        n = actors_on_free_gpus(free, self.config.leave_gpus, self.config.gpus_per_actor)
        log.info(
            "evaluation pool: %d actors x %g GPU (the cluster has %d GPUs, %g free, %g left to others)",
            n,
            self.config.gpus_per_actor,
            self._gpus,
            free,
            self.config.leave_gpus,
        )
        return n

    def _options(self, settings: EvalSettings) -> dict[str, Any]:
        gpus = self.config.gpus_per_actor if self.device == "cuda" else 0
        return {
            "num_cpus": self.config.cpus_per_actor,
            "num_gpus": gpus,
            "max_concurrency": settings.workers,
            "max_restarts": 0,
            "max_task_retries": 0,
            "resources": dict(self.config.actor_resources) or None,
        }

    def launch(self, settings: EvalSettings) -> tuple[Any, dict]:
        from envs.pool.actor import EvalActor

        handle = EvalActor.options(**self._options(settings)).remote(settings, self.config.reaper)
        timeout = self.config.actor_startup_timeout
        try:
            info = ray.get(handle.ready.remote(), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            ray.kill(handle)
            need = f"{self.config.cpus_per_actor:g} CPU" + (
                f", {self.config.gpus_per_actor:g} GPU" if self.device == "cuda" else ""
            )
            raise EvaluatorError(
                f"an evaluation actor was not ready within {timeout:g} s; does the cluster have "
                f"free resources for it ({need}{self.config.actor_resources or ''})?"
            ) from None
        except Exception as e:
            ray.kill(handle)
            raise EvaluatorError(f"an evaluation actor failed to start: {self.unwrap(e)}") from None
        return handle, info

    def execute(
        self, handle: Any, problem: Problem, solution: Any, baselines: dict | None
    ) -> concurrent.futures.Future:
        return handle.execute.remote(problem, solution, baselines).future()

    def profile(self, handle: Any, problem: Problem, solution: Any, calls: int) -> concurrent.futures.Future:
        return handle.profile.remote(problem, solution, calls).future()

    def is_actor_failure(self, exc: BaseException) -> bool:
        return isinstance(
            exc,
            (
                ray.exceptions.RayActorError,
                ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError,
            ),
        )

    def unwrap(self, exc: BaseException) -> BaseException:
        if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(getattr(exc, "cause", None), BaseException):
            return exc.cause
        return exc

    def kill(self, handle: Any) -> None:
        try:
            ray.kill(handle, no_restart=True)
        except Exception as e:  # already gone
            log.debug("ray.kill: %s", e)

    def stats(self, handles: dict[int, Any], timeout: float) -> dict[int, dict]:
        refs = {i: h.stats.remote() for i, h in handles.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        out = {}
        for i, ref in refs.items():
            if ref in ready:
                try:
                    out[i] = ray.get(ref)
                except Exception:
                    pass
        return out

    def shutdown(self, handles: list[Any], graceful: bool) -> None:
        if graceful and handles:
            refs = [h.shutdown.remote() for h in handles]
            ray.wait(refs, num_returns=len(refs), timeout=self.config.shutdown_timeout)
        for h in handles:
            self.kill(h)

    def close(self, infos: list[dict]) -> None:
        """Wait (here, for actors of this node) until each actor's reaper has exited, i.e. its
        workers are gone; then disconnect from Ray if this pool started it."""
        reapers = []
        for info in infos:
            pid = info.get("reaper_pid")
            if pid and info.get("node_id") == getattr(self, "_node_id", None):
                try:
                    reapers.append(psutil.Process(pid))
                except psutil.Error:
                    pass
        _, alive = psutil.wait_procs(reapers, timeout=15)
        if alive:
            log.warning("reapers %s still running 15 s after their actors were stopped", [p.pid for p in alive])
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()

    def exporter(self, name: str) -> Any:
        try:
            return RayExporter(name)
        except Exception as e:
            log.warning("Ray metrics export disabled: %s", e)
            return None


class RayEvaluationPool(EvaluationPool):
    """Evaluation on Ray actors (GPUs of a cluster, or CPU actors running the Triton interpreter).

    pool = RayEvaluationPool(EvalSettings(device="cpu"), PoolConfig(num_actors=2), cache)
    verdict = pool.evaluate(problem, answer)                    # like Evaluator.evaluate
    future = pool.submit(problem, answer, priority="validation")
    verdicts = pool.evaluate_many(items, progress=True)
    pool.profile(problem, answer)                               # the profile tool's facts (GPU actors)
    pool.metrics()                                              # flat dict for wandb.log
    pool.close()
    """

    def __init__(
        self,
        settings: EvalSettings | None = None,
        config: PoolConfig | None = None,
        cache: SqliteCache | None = None,
        reserve_gpus: Callable[[], float] | None = None,
    ):
        """`reserve_gpus`, called once Ray is connected (the answer may depend on the cluster): GPUs that actors
        started after the pool will ask for (train.py: its learner and rollout engines), added to
        pool.leave_gpus when the pool sizes itself on cuda."""
        # Actors on this node would otherwise see the driver's verdict cache through the sandbox's read-only root.
        settings = (settings or EvalSettings()).hiding(cache.path if cache is not None else None)
        backend = RayBackend(settings, config or PoolConfig(), reserve_gpus)
        config = backend.config
        try:
            super().__init__(backend, settings, config, cache)
        except BaseException:
            if backend.owns_ray and ray.is_initialized():
                ray.shutdown()
            raise

    def worker_pids(self, wrappers: bool = False) -> dict[int, list[int]]:
        """Worker (harness) process ids per live actor, with `wrappers` also the sandbox's processes around
        them (diagnostics and tests)."""
        with self._lock:
            handles = {a.id: a.handle for a in self.actors.live()}
        return {i: ray.get(h.worker_pids.remote(wrappers), timeout=30) for i, h in handles.items()}

    def kill_actor(self, actor_id: int | None = None) -> int:
        """Kill one actor abruptly, as a node failure would (tests, chaos drills); its id."""
        with self._lock:
            alive = sorted(a.id for a in self.actors.live())
            actor_id = alive[0] if actor_id is None else actor_id
            handle = self.actors.handle(actor_id)
        ray.kill(handle, no_restart=True)
        return actor_id
