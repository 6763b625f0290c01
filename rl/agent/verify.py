"""The winner's curse: the best of many noisy timings is biased upward, so the winner is measured again.

Each problem's top `candidates` correct kernels (by search fitness) are evaluated once more in a FRESH
evaluator (new worker processes, no verdict cache, so nothing is reused), with fresh unpredictable input
seeds and `timed_runs` timed runs (more than the search's), its eager anchor interleaved with the kernel's
runs as always (envs/speedup.py). The verified winner is the one with the best re-measured fitness that is
still correct; its verdict is the one reported. A kernel that fails its re-verification is reported as such.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from envs.evaluator import Evaluator
from envs.settings import EvalSettings
from envs.verdict import Verdict
from rewards.kernel_reward import reward_for_verdict
from rl.agent.features import fitness
from rl.agent.search import ProblemOutcome
from rl.agent.records import CandidateRecord

__all__ = ["VerifyConfig", "Verified", "verify_winners"]


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    enabled: bool = True
    candidates: int = 2  # top kernels per problem measured again
    timed_runs: int = 300
    anchor_runs: int = 150

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.timed_runs < 1 or self.anchor_runs < 1:
            raise ValueError("agent.verify: candidates, timed_runs and anchor_runs must be >= 1")


@dataclasses.dataclass(frozen=True)
class Verified:
    problem_id: str
    record: CandidateRecord | None  # the verified winner (None: no correct kernel, or none survived)
    verdict: Verdict | None  # its re-measured verdict (None when verification is off: the search verdict stands)
    tried: tuple[tuple[int, Verdict], ...] = ()  # (candidate id, its re-verification verdict), best first


def verify_winners(
    outcomes: list[ProblemOutcome], settings: EvalSettings, config: VerifyConfig, delta: float, judge: Any = None
) -> list[Verified]:
    if not config.enabled:
        return [Verified(o.problem.id, o.best if o.best and o.best.correct else None, None) for o in outcomes]
    fresh = dataclasses.replace(settings, seed=None, timed_runs=config.timed_runs, anchor_runs=config.anchor_runs)
    out = []
    with Evaluator(fresh, cache=None, judge=judge) as evaluator:
        for o in outcomes:
            correct = sorted(
                (r for r in o.records if r.correct and r.duplicate_of is None),
                key=lambda r: (fitness(r.verdict, r.reward), -r.id),
                reverse=True,
            )[: config.candidates]
            tried, survivors = [], []
            for record in correct:
                verdict = evaluator.evaluate(o.problem, record.proposal.text)
                tried.append((record.id, verdict))
                if verdict.correct:
                    score = fitness(verdict, reward_for_verdict(verdict, delta))
                    survivors.append((score, -record.id, record, verdict))
            if survivors:
                _, _, record, verdict = max(survivors, key=lambda s: (s[0], s[1]))
                out.append(Verified(o.problem.id, record, verdict, tuple(tried)))
            else:
                out.append(Verified(o.problem.id, None, None, tuple(tried)))
    return out
