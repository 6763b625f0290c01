"""The Ray actor of the evaluation pool: one GPU (or one CPU running the Triton interpreter) and a
`WorkerSet` of warm worker processes on it.

The actor is threaded (max_concurrency = its workers), so its workers evaluate concurrently while
the WorkerSet's DeviceLock keeps timing exclusive on the GPU. Control calls (ready, stats,
shutdown) run in their own concurrency group, so they answer while every worker is busy.
"""

from __future__ import annotations

import os
import threading
import time

import ray

from envs.problems import Problem
from envs.settings import EvalSettings
from envs.source import CanonicalSolution
from envs.verdict import Verdict
from envs.worker.worker_set import EvaluatorError, WorkerSet


def _visible_gpu() -> int | str:
    """The GPU Ray assigned to this actor, as the worker's CUDA_VISIBLE_DEVICES must name it.

    Ray narrows CUDA_VISIBLE_DEVICES to the actor's GPU, but a worker process sets its own
    CUDA_VISIBLE_DEVICES to the index it is given, so the index must be the physical one Ray chose
    (an integer, or a GPU/MIG UUID), not 0.
    """
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        raise EvaluatorError("the evaluation actor was given no GPU (CUDA_VISIBLE_DEVICES is empty)")
    return int(visible[0]) if visible[0].isdigit() else visible[0]


class DeviceEvaluator:
    """One device's evaluations: its WorkerSet and how busy it keeps the device. The actor's plain-Python
    body (also usable without Ray)."""

    def __init__(self, settings: EvalSettings, reaper: bool = True):
        gpu_ids = [_visible_gpu()] if settings.device == "cuda" else None
        # Its workers die with this actor (envs/worker/lifeline.py); the pool's reaper kills what their
        # candidates started once the actor is gone.
        self.pool = WorkerSet(settings, gpu_ids, reap=reaper)
        self.reaper_pid = self.pool.reaper_pid
        self._lock = threading.Lock()
        self._active = 0
        self._busy_since = 0.0
        self._busy = 0.0  # seconds with at least one candidate executing (the device in use)
        self._busy_sum = 0.0  # worker-seconds executing
        self._executions = 0
        self._since = time.monotonic()

    def ready(self) -> dict:
        """Wait for the first worker; describe this actor."""
        kind = self.pool.device_kind
        self._since = time.monotonic()
        try:
            node_id = ray.get_runtime_context().get_node_id()
        except Exception:
            node_id = None
        return {
            "device_kind": kind,
            "workers": self.pool.size,
            "pid": os.getpid(),
            "node_id": node_id,
            "reaper_pid": self.reaper_pid,
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES") if self.pool.device == "cuda" else None,
        }

    def execute(
        self, problem: Problem, solution: CanonicalSolution, baselines: dict | None
    ) -> tuple[Verdict, dict | None, dict]:
        with self._lock:
            started = time.monotonic()
            if self._active == 0:
                self._busy_since = started
            self._active += 1
        try:
            verdict, measured = self.pool.execute(problem, solution, baselines)
        finally:
            with self._lock:
                now = time.monotonic()
                self._active -= 1
                if self._active == 0:
                    self._busy += now - self._busy_since
                self._busy_sum += now - started
                self._executions += 1
        return verdict, measured, self.stats()

    def profile(self, problem: Problem, solution: CanonicalSolution, calls: int = 10) -> dict:
        """The `profile` tool's facts from one of this actor's workers (envs.worker.worker_set.WorkerSet.profile)."""
        return self.pool.profile(problem, solution, calls)

    def stats(self) -> dict:
        with self._lock:
            now = time.monotonic()
            busy = self._busy + (now - self._busy_since if self._active else 0.0)
            wall = max(now - self._since, 1e-9)
            return {
                "busy_s": busy,
                "wall_s": wall,
                "busy_fraction": min(1.0, busy / wall),
                "worker_utilization": min(1.0, self._busy_sum / (wall * self.pool.size)),
                "executions": self._executions,
                "active": self._active,
                # requests run again after the GPU was full of other processes, and those never got through
                "oom_retries": self.pool.oom_retries,
                "oom_failures": self.pool.oom_failures,
                "gpu_concurrency_cuts": self.pool.concurrency_cuts,
                "worker_replacements": self.pool.replacements,
            }

    def worker_pids(self, wrappers: bool = False) -> list[int]:
        return self.pool.worker_pids(wrappers=wrappers)

    def shutdown(self) -> None:
        """Stop every worker process (running evaluations end as crashes)."""
        self.pool.close()


@ray.remote(concurrency_groups={"control": 2})
class EvalActor(DeviceEvaluator):
    @ray.method(concurrency_group="control")
    def ready(self) -> dict:
        return super().ready()

    @ray.method(concurrency_group="control")
    def stats(self) -> dict:
        return super().stats()

    @ray.method(concurrency_group="control")
    def worker_pids(self, wrappers: bool = False) -> list[int]:
        return super().worker_pids(wrappers)

    @ray.method(concurrency_group="control")
    def shutdown(self) -> None:
        super().shutdown()
