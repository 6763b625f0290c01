"""An `envs.Evaluator` (one machine, no Ray) behind the tools, the agent and the benchmark, as a `KernelEvaluator`.

`Evaluator` itself is one; this wrapper stays for callers that hand it out while closing the evaluator themselves.
"""

from __future__ import annotations

from typing import Any

from envs.evaluator import Evaluator
from envs.problems import Problem
from envs.verdict import Verdict


class LocalEvaluation:
    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator

    @property
    def device(self) -> str:
        return self.evaluator.device

    def evaluate(self, problem: Problem, answer: str) -> Verdict:
        return self.evaluator.evaluate(problem, answer)

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        return await self.evaluator.evaluate_async(problem, answer, priority)

    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        return self.evaluator.profile(problem, answer, calls)

    def metrics(self) -> dict[str, Any]:
        return self.evaluator.metrics()
