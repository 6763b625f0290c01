"""An `envs.Evaluator` (one machine, no Ray) as the tools' evaluation backend: evaluate_async and profile.

The Ray pool (envs.pool.RayEvaluationPool) already has `evaluate_async`; this adapter gives the local
Evaluator the same interface, so the benchmark, the agent, tests and a single GPU run tools without Ray.
"""

from __future__ import annotations

import asyncio

from envs.evaluator import Evaluator
from envs.problems import Problem
from envs.verdict import Verdict


class LocalEvaluation:
    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator

    @property
    def device(self) -> str:
        return self.evaluator.device

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        return await asyncio.to_thread(self.evaluator.evaluate, problem, answer)

    def profile(self, problem: Problem, answer: str) -> dict:
        return self.evaluator.profile(problem, answer)
