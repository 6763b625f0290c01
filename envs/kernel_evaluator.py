"""`KernelEvaluator`: the one interface everything that evaluates a kernel holds (the RL loop, the agent, the
tools, the service), so they depend on what an evaluator does, not on the Ray pool or the local Evaluator.

`envs.pool.EvaluationPool` (and `RayEvaluationPool`) and `envs.evaluator.Evaluator` implement it.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Iterable, Protocol

from envs.problems import Problem
from envs.verdict import Verdict


class KernelEvaluator(Protocol):
    @property
    def device(self) -> str:
        """Where candidates run: `cpu` (the Triton interpreter) or `cuda`."""
        ...

    def evaluate(self, problem: Problem, answer: str) -> Verdict:
        """Evaluate a model's answer (markdown with a fenced python block, or bare code); blocks."""
        ...

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        """The same without blocking the event loop; `priority` (envs.pool.PRIORITIES) orders a queue, if any."""
        ...

    def prepare_baselines(
        self, problems: Iterable[Problem], priority: str = "baseline"
    ) -> list[concurrent.futures.Future]:
        """Measure the problems' baselines ahead of their candidates (CUDA; a no-op elsewhere), in the given
        order; `priority` orders a queue, if any. Futures of Verdicts: `correct` when the reference ran, else
        why it did not."""
        ...

    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        """The `profile` tool's facts: {"profile": facts} or {"error": why}."""
        ...

    def metrics(self) -> dict[str, Any]:
        """A flat dict of the evaluator's state and history, for a run's log (empty when it keeps none)."""
        ...
