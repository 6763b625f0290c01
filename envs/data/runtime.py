"""Stage: baseline runtime. On a GPU every problem's eager PyTorch and TorchInductor times are measured through
the evaluation workers (the same timing method, L2 flush and CUDA events as every verdict's baselines) and
problems whose eager median lies outside [min_ms, max_ms] are dropped: too fast and launch overhead is all a
kernel can win, too slow and a rollout's evaluation takes too long (the paper keeps 1 ms .. 1 s). On a CPU
nothing meaningful can be timed: the stage keeps everything and notes that it was skipped."""

from __future__ import annotations

import concurrent.futures
import dataclasses

from envs.data.records import CandidateProblem, StageResult
from envs.problems import parse_problem
from envs.worker.worker_set import EvaluatorError, WorkerSet

__all__ = ["RuntimeConfig", "filter_runtime", "judge_baselines"]


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    min_ms: float = 1.0
    max_ms: float = 1000.0


def _median(stats: dict | None) -> float | None:
    """The median of a worker's timing record (envs.verdict.TimingStats as a dict), None when not measured."""
    return float(stats["median_ms"]) if isinstance(stats, dict) and stats.get("median_ms") is not None else None


def judge_baselines(
    c: CandidateProblem, measured: dict, config: RuntimeConfig, result: StageResult, device_kind: str
) -> None:
    """Keep or reject one problem by its measured baselines ({"eager": TimingStats dict, "inductor": ... or
    None}, what WorkerSet.measure_baselines returns)."""
    eager, inductor = _median(measured.get("eager")), _median(measured.get("inductor"))
    scored = c.with_facts(baselines={"eager_ms": eager, "inductor_ms": inductor, "device": device_kind})
    if eager is None:
        result.reject(scored, "no eager time measured")
    elif eager < config.min_ms:
        result.reject(scored, f"eager {eager:.3f} ms < {config.min_ms} ms", eager)
    elif eager > config.max_ms:
        result.reject(scored, f"eager {eager:.1f} ms > {config.max_ms} ms", eager)
    else:
        result.keep(
            scored, f"eager {eager:.3f} ms, inductor {'n/a' if inductor is None else f'{inductor:.3f} ms'}", eager
        )


def filter_runtime(
    candidates: list[CandidateProblem], pool: WorkerSet | None, config: RuntimeConfig = RuntimeConfig()
) -> StageResult:
    result = StageResult("runtime")
    if pool is None or pool.device != "cuda":
        for c in candidates:
            result.note(c, "skipped: no GPU (CPU times say nothing about the GPU bound)")
            result.keep(c.with_facts(baselines=None), "kept unmeasured (no GPU)")
        return result

    def one(c: CandidateProblem) -> tuple[CandidateProblem, dict | str]:
        try:
            return c, pool.measure_baselines(parse_problem(c.source, c.id))
        except EvaluatorError as e:
            return c, str(e)[:400]

    with concurrent.futures.ThreadPoolExecutor(max(1, pool.size)) as ex:
        for c, measured in ex.map(one, candidates):
            if isinstance(measured, str):
                result.reject(c, f"baseline measurement failed: {measured}")
            else:
                judge_baselines(c, measured, config, result, pool.device_kind)
    return result
