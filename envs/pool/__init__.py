"""KernelRL's evaluation pool on Ray: the CPU stage in the driver, execution in GPU (or CPU) actors.

    from envs.pool import PoolConfig, RayEvaluationPool
    with RayEvaluationPool(EvalSettings(), PoolConfig(num_actors=None), cache) as pool:
        verdicts = pool.evaluate_many(items)

`envs.pool.core` and its components do not import Ray; `RayEvaluationPool` is loaded on first use. How the
components are wired, and in which thread or process each runs: envs/pool/README.md.
"""

from envs.pool.config import PoolConfig
from envs.pool.core import Backend, EvaluationPool
from envs.pool.scheduler import PRIORITIES, PoolClosedError, PoolFullError

__all__ = [
    "Backend",
    "EvaluationPool",
    "PRIORITIES",
    "PoolClosedError",
    "PoolConfig",
    "PoolFullError",
    "RayEvaluationPool",
]


def __getattr__(name: str):
    if name == "RayEvaluationPool":
        from envs.pool.ray_backend import RayEvaluationPool

        return RayEvaluationPool
    raise AttributeError(name)
