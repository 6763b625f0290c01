"""Typed settings of the Ray evaluation pool (Hydra group `pool`, conf/pool/default.yaml)."""

from __future__ import annotations

import dataclasses
from typing import Any

from envs.settings import reject_unknown


@dataclasses.dataclass(frozen=True)
class PoolConfig:
    # Where the actors run. None: the Ray instance this process is already connected to, else a new
    # local one (`ray.init()`); "auto" or "ray://host:10001": a running cluster.
    address: str | None = None
    namespace: str | None = None
    init_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)  # extra ray.init arguments
    runtime_env: dict[str, Any] | None = None  # e.g. {"working_dir": "."} when nodes lack the package

    # Actors. On cuda an actor owns `gpus_per_actor` of one GPU (Ray's fractional GPUs: 0.25 shares a GPU with
    # the learner and the rollout engine); on cpu one CPU running the Triton interpreter.
    num_actors: int | None = None  # None: on cuda as many as fit in the free GPUs less leave_gpus, 2 on cpu
    gpus_per_actor: float = 1.0  # cuda only, in (0, 1]
    leave_gpus: float = 0.0  # cuda, num_actors null: GPUs the pool leaves to others (train.py adds its learner's
    # and rollout engines' own requests to this)
    workers_per_actor: int | None = None  # warm worker processes per actor; None: EvalSettings.workers
    cpus_per_actor: float = 1.0
    actor_resources: dict[str, float] = dataclasses.field(default_factory=dict)  # custom Ray resources
    actor_startup_timeout: float = 600.0  # seconds for an actor to start and warm its first worker
    max_actor_restarts: int = 32  # replacements of dead actors over the pool's life
    execution_timeout: float | None = None  # one request on an actor; None: derived from the phase timeouts
    reaper: bool = True  # a sidecar per actor kills what its workers started if the actor dies abruptly
    shutdown_timeout: float = 30.0  # seconds close() lets actors stop their workers before killing them

    # Driver.
    max_pending: int = 4096  # submitted but unanswered requests; submit blocks (or raises) beyond
    cpu_stage_threads: int = 4  # threads running the CPU stage (extract, canonicalize, checks, cache)
    finish_threads: int = 2  # threads writing the cache (and asking the judge) after execution

    # Metrics.
    name: str = "eval"  # the `pool` tag on exported metrics
    ray_metrics: bool = True  # export through ray.util.metrics (Prometheus on the Ray dashboard)
    latency_window: int = 10000  # samples per stage kept for percentiles
    stats_timeout: float = 2.0  # seconds metrics() waits for the actors' busy statistics

    def __post_init__(self) -> None:
        if self.num_actors is not None and self.num_actors < 1:
            raise ValueError("pool.num_actors must be >= 1 (or null)")
        if not 0 < self.gpus_per_actor <= 1 or self.leave_gpus < 0:
            raise ValueError("pool.gpus_per_actor must be in (0, 1] and pool.leave_gpus >= 0")
        if self.workers_per_actor is not None and self.workers_per_actor < 1:
            raise ValueError("pool.workers_per_actor must be >= 1 (or null)")
        if self.max_pending < 1 or self.cpu_stage_threads < 1 or self.finish_threads < 1:
            raise ValueError("pool.max_pending, pool.cpu_stage_threads and pool.finish_threads must be >= 1")
        if self.max_actor_restarts < 0:
            raise ValueError("pool.max_actor_restarts must be >= 0")
        if self.execution_timeout is not None and self.execution_timeout <= 0:
            raise ValueError("pool.execution_timeout must be > 0 (or null)")

    @classmethod
    def from_mapping(cls, m: dict[str, Any] | None) -> PoolConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "pool")
        for key in ("init_kwargs", "actor_resources"):
            if m.get(key) is None:
                m.pop(key, None)
            else:
                m[key] = dict(m[key])
        return cls(**m)
