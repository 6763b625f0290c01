"""The policies the agent asks for kernels, and the bandit that chooses among them.

A `Policy` is a named rollout engine (rl.rollout.make_engine: vllm, hf, openai, one trained checkpoint or an
API model) with its sampling settings, or `ReplayEngine`: the benchmark's files policy (rl.bench.policies
layout, <stem>.py or <stem>/<k>.py) served one file per request, in order, so a directory of candidate
kernels can seed or drive a search without a model. Several policies run at once; `PolicyBandit` (UCB1 over
the verdicts' rewards, rebuilt from the store on resume) sends more requests to the ones that do better.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, AsyncIterator

from envs.problems import Problem
from rl.bench.policies import FilesPolicyError, answer_files, file_sample
from rl.types import RolloutRequest, Sample, SamplingConfig, WeightUpdate

__all__ = ["Policy", "PolicyBandit", "ReplayEngine"]


class ReplayEngine:
    """Answers each request for a problem with that problem's next answer file (sample order), once each."""

    def __init__(self, directory: str | Path, problems: list[Problem]):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FilesPolicyError(f"agent replay policy dir {directory}: no such directory")
        self.files = {p.id: answer_files(self.directory, p) for p in problems}
        if not any(self.files.values()):
            raise FilesPolicyError(
                f"agent replay policy dir {directory}: holds no answer for any of the "
                f"{len(problems)} problems (<stem>.py|.md or <stem>/<k>.py|.md)"
            )
        self.cursor = {pid: 0 for pid in self.files}

    def remaining(self, problem_id: str) -> int:
        return len(self.files.get(problem_id, [])) - self.cursor.get(problem_id, 0)

    def skip(self, problem_id: str, count: int) -> None:
        """Resume: the first `count` files of the problem were replayed by an earlier run."""
        self.cursor[problem_id] = min(self.cursor.get(problem_id, 0) + count, len(self.files.get(problem_id, [])))

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        for r in requests:
            for index in range(r.sampling.n):
                path = None
                if self.remaining(r.problem_id) > 0:
                    path = self.files[r.problem_id][self.cursor[r.problem_id]]
                    self.cursor[r.problem_id] += 1
                yield file_sample(r, index, path, f"replay: no answer file left for {r.problem_id}")

    def update_weights(self, update: WeightUpdate) -> float:
        raise FilesPolicyError("the replay policy has no weights")

    def shutdown(self) -> None:
        pass


@dataclasses.dataclass
class Policy:
    name: str
    engine: Any  # rl.types.RolloutEngine (or ReplayEngine)
    sampling: SamplingConfig

    @property
    def replay(self) -> bool:
        return isinstance(self.engine, ReplayEngine)

    def available(self, problem_id: str) -> bool:
        return not self.replay or self.engine.remaining(problem_id) > 0

    async def sample(self, request: RolloutRequest) -> Sample:
        """The request's one sample (n is forced to 1: the agent asks for one kernel per operator step)."""
        request = dataclasses.replace(request, sampling=dataclasses.replace(self.sampling, n=1))
        out = None
        async for sample in self.engine.generate([request]):
            out = sample
        if out is None:
            raise RuntimeError(f"policy {self.name} returned no sample for {request.request_id}")
        return out


class PolicyBandit:
    """UCB1 (Auer et al. 2002) over policies; the payoff of a request is its verdict's reward in [0, 1].
    Untried policies go first, in configuration order; ties go to the earlier policy (deterministic)."""

    def __init__(self, names: list[str], exploration: float = 1.0):
        if not names:
            raise ValueError("the agent needs at least one policy")
        self.names = list(names)
        self.exploration = exploration
        self.pulls = {n: 0 for n in names}
        self.total = {n: 0.0 for n in names}

    def record(self, name: str, payoff: float) -> None:
        if name in self.pulls:
            self.pulls[name] += 1
            self.total[name] += payoff

    def choose(self, allowed: list[str]) -> str:
        allowed = [n for n in self.names if n in allowed]
        if not allowed:
            raise ValueError("no policy is available")
        for n in allowed:
            if self.pulls[n] == 0:
                return n
        pulls = sum(self.pulls[n] for n in allowed)

        def ucb(n: str) -> float:
            mean = self.total[n] / self.pulls[n]
            return mean + self.exploration * math.sqrt(2.0 * math.log(pulls) / self.pulls[n])

        return max(allowed, key=lambda n: (ucb(n), -self.names.index(n)))
