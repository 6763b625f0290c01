"""GPU profiles of parents: where a correct parent's device time goes, shown in its mutation or crossover prompt.

The facts are the `profile` tool's (envs/worker/profiling.py, through the pool's `profile(problem, answer)`:
`envs.Evaluator` or `envs.pool.RayEvaluationPool`): device time per kernel and per forward,
achieved DRAM bandwidth and FLOP/s against the GPU's peak, the physical floor. The prompt renders them with the
tool's own formatter (envs/tools/profile.py format_profile), so the agent and a tool-using policy read the same
text. Each kernel is profiled at most once: the result (a failure too) is kept in the population store, also
across a resume. Only correct parents are profiled (a failing one is to be fixed, not made faster), within
`agent.budget.*.profiles`; the search counts their seconds as `eval_seconds`.

On a CPU pool nothing is profiled: the Triton interpreter measures no device time (`CPU_NOTE`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from rl.agent.records import CandidateRecord
from rl.agent.store import PopulationStore

__all__ = ["ParentProfiler", "CPU_NOTE", "profile_facts"]

log = logging.getLogger("kernelrl.agent")

CPU_NOTE = (
    "profile feedback skipped: the pool evaluates on the CPU (Triton interpreter), where device time is not measured"
)


class ParentProfiler:
    def __init__(self, pool: KernelEvaluator, store: PopulationStore, enabled: bool = True):
        self.pool, self.store = pool, store
        device = getattr(pool, "device", "cpu")
        self.active = enabled and device == "cuda"
        self.note = "" if self.active or not enabled else CPU_NOTE
        if enabled and self.active and not callable(getattr(pool, "profile", None)):
            raise ValueError(f"agent.profile_feedback: the pool {type(pool).__name__} has no profile(problem, answer)")
        self._in_flight: dict[tuple[str, str], asyncio.Future] = {}

    def wanted(self, parent: CandidateRecord) -> bool:
        """Whether a profile of `parent` belongs in its mutation prompt at all (before any budget)."""
        return self.active and parent.correct

    def cached(self, problem: Problem, parent: CandidateRecord) -> dict | None:
        """The stored result for the parent's kernel ({"profile": facts} or {"error": why}), or None."""
        return self.store.profile(problem.id, parent.source_sha256)

    def running(self, problem: Problem, parent: CandidateRecord) -> bool:
        return (problem.id, parent.source_sha256) in self._in_flight

    async def run(self, problem: Problem, parent: CandidateRecord) -> tuple[dict, float | None]:
        """Profile the parent's kernel now, store the result; (result, seconds it took). Concurrent calls for one
        kernel share one profile: the later ones get seconds None (they spent nothing)."""
        key = (problem.id, parent.source_sha256)
        if key in self._in_flight:
            return await asyncio.shield(self._in_flight[key]), None
        future = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        t0 = time.monotonic()
        try:
            try:
                result = await asyncio.to_thread(self.pool.profile, problem, parent.proposal.text)
            except Exception as e:  # a profile is feedback, never a reason to stop the search
                result = {"error": f"{type(e).__name__}: {e}"[:1500]}
            if not isinstance(result, dict) or not ("profile" in result or "error" in result):
                result = {"error": f"malformed profile result: {str(result)[:200]}"}
            seconds = time.monotonic() - t0
            self.store.add_profile(problem.id, parent.source_sha256, result, seconds)
            log.info(
                "%s: profiled parent #%d in %.1f s%s",
                problem.id,
                parent.id,
                seconds,
                f" (failed: {result['error'][:200]})" if "error" in result else "",
            )
            future.set_result(result)
            return result, seconds
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: no warning when nobody else waited
            raise
        finally:
            self._in_flight.pop(key, None)


def profile_facts(result: dict | None) -> dict | None:
    """The facts of a successful profile result, else None (a failed profile adds nothing to the prompt)."""
    if result is None or not isinstance(result.get("profile"), dict):
        return None
    return result["profile"]
