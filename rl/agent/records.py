"""The typed records the agent's modules exchange: one evaluated candidate, and what an operator proposes.

A `CandidateRecord` is one row of the population store (rl.agent.store): the kernel, how it was made (operator,
strategy, policy, parents, the prompt it was made from), what the evaluator said (the full Verdict) and what it
cost (LLM tokens, dollars, evaluation seconds). Everything is plain data so rows round-trip through SQLite/JSON.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from envs.guard import guarded
from envs.source import CanonicalSolution, canonicalize, extract_code
from envs.verdict import Verdict
from rl.types import Message

__all__ = ["CandidateRecord", "Proposal", "LLM_OPERATORS", "OPERATORS", "source_key"]

# Operators that call a policy (count against LLM budgets) and the one that does not.
LLM_OPERATORS = ("fresh", "mutate", "crossover", "retrieval")
OPERATORS = (*LLM_OPERATORS, "tune")


def source_key(text: str) -> str:
    """The identity of a candidate: the sha256 of its canonical code (comments, docstrings and formatting do
    not make a new candidate); the raw text's hash when it does not parse (still a distinct, failed candidate)."""
    canonical = guarded("source_key", canonicalize, extract_code(text))
    if isinstance(canonical, CanonicalSolution):
        return canonical.sha256
    return "raw:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Proposal:
    """What one operator application produced, before evaluation."""

    operator: str  # one of OPERATORS
    text: str  # the answer as the policy wrote it (markdown or code), or the tuner's rewritten source
    strategy: str = ""  # fresh: plain | fused | tiled | autotuned; tune: the rewrite, e.g. "BLOCK 4096->2048"
    policy: str = ""  # the policy (engine) that wrote it; "" for the tuner
    parents: tuple[int, ...] = ()  # candidate ids it was derived from
    prompt: list[Message] | None = None  # the messages the policy answered (None for the tuner)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: unknown / free (local models, the tuner)
    generate_seconds: float = 0.0
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.operator not in OPERATORS:
            raise ValueError(f"operator must be one of {OPERATORS}, not {self.operator!r}")


@dataclasses.dataclass(frozen=True)
class CandidateRecord:
    """An evaluated proposal, as stored. `id` is the store's row id (increasing in insertion order)."""

    id: int
    problem_id: str
    proposal: Proposal
    source_sha256: str
    verdict: Verdict
    island: int
    cell: str  # the MAP-Elites cell of its kernel features (rl.agent.features)
    eval_seconds: float = 0.0
    duplicate_of: int | None = None  # an identical kernel was already evaluated: its id (verdict copied)
    created: float = 0.0
    reward: float = 0.0  # rewards/kernel_reward.py of the verdict at the run's delta (the verdict carries none)

    @property
    def correct(self) -> bool:
        return self.verdict.correct

    @property
    def speedup(self) -> float | None:
        return self.verdict.speedup if self.verdict.correct else None

    def to_row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "problem_id": self.problem_id,
            "operator": self.proposal.operator,
            "strategy": self.proposal.strategy,
            "policy": self.proposal.policy,
            "parents": list(self.proposal.parents),
            "status": self.verdict.status.value,
            "speedup": self.verdict.speedup,
            "reward": self.reward,
            "island": self.island,
            "cell": self.cell,
            "duplicate_of": self.duplicate_of,
            "prompt_tokens": self.proposal.prompt_tokens,
            "completion_tokens": self.proposal.completion_tokens,
            "cost_usd": self.proposal.cost_usd,
            "eval_seconds": self.eval_seconds,
        }
