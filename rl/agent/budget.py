"""Budget caps per problem and over the whole run, and the early stops at a target speedup or near the floor.

Usage is computed from the store's candidates (so a resumed run starts with what it already spent) plus the
run's wall clock. A cap of None is no cap. LLM calls and tokens count every policy request (duplicates too:
the model was asked); evaluations count kernels sent to the pool (duplicates are not: they reuse a verdict);
`eval_seconds` is the pool's wall time per evaluation (GPU-seconds on a GPU pool), GPU profiles of mutation
parents included; `profiles` caps those profiles (rl.agent.profiles) and blocks nothing else.

The floor stop: the evaluator reports the anti-hack's physical floor of a problem on a GPU (`Verdict.floor_ms`:
the longer of minimum bytes at peak bandwidth and FLOPs at peak); once a correct kernel's `speed_of_light` (floor / its
median time) reaches `stop_at_floor_fraction`, little is left to gain and the problem stops. On the CPU no floor
is measured (the interpreter's times mean nothing), so the rule never fires there.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from envs.settings import reject_unknown
from rl.agent.records import LLM_OPERATORS, CandidateRecord

__all__ = ["Budget", "Usage", "BudgetConfig"]

_CAPS = ("llm_calls", "evaluations", "tokens", "cost_usd", "eval_seconds", "profiles")


@dataclasses.dataclass(frozen=True)
class Budget:
    llm_calls: int | None = None
    evaluations: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    eval_seconds: float | None = None
    profiles: int | None = None  # GPU profiles of mutation parents (cached per kernel in the store)

    def __post_init__(self) -> None:
        for cap in _CAPS:
            value = getattr(self, cap)
            if value is not None and value < 0:
                raise ValueError(f"agent budget {cap} must be >= 0 (or null for no cap)")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None, what: str) -> Budget:
        m = dict(m or {})
        reject_unknown(cls, m, what)
        return cls(**m)


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    per_problem: Budget = Budget(llm_calls=16, evaluations=24, profiles=4)
    total: Budget = Budget()
    wall_seconds: float | None = None  # the whole run
    target_speedup: float | None = None  # stop a problem once a correct kernel reaches it (GPU)
    # Stop a problem once a correct kernel's floor_ms / median time reaches this (GPU; never fires on CPU). The
    # floor counts FLOPs at the bf16 tensor-core peak, so compute-bound fp32 problems stay far from it: the rule
    # only stops kernels that are really near the memory (or tensor-core) bound.
    stop_at_floor_fraction: float | None = 0.8

    def __post_init__(self) -> None:
        f = self.stop_at_floor_fraction
        if f is not None and not 0 < f:
            raise ValueError(f"agent.budget.stop_at_floor_fraction must be > 0 (e.g. 0.8) or null, not {f!r}")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> BudgetConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "agent.budget")
        return cls(
            per_problem=Budget.from_mapping(m.pop("per_problem", None), "agent.budget.per_problem"),
            total=Budget.from_mapping(m.pop("total", None), "agent.budget.total"),
            **m,
        )


@dataclasses.dataclass
class Usage:
    llm_calls: int = 0
    evaluations: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    eval_seconds: float = 0.0
    profiles: int = 0

    def add_profile(self, seconds: float) -> None:
        self.profiles += 1
        self.eval_seconds += seconds

    def add(self, record: CandidateRecord) -> None:
        p = record.proposal
        if p.operator in LLM_OPERATORS:
            self.llm_calls += 1
        self.tokens += p.prompt_tokens + p.completion_tokens
        self.cost_usd += p.cost_usd or 0.0
        if record.duplicate_of is None:
            self.evaluations += 1
            self.eval_seconds += record.eval_seconds

    @classmethod
    def of(cls, records: Iterable[CandidateRecord]) -> Usage:
        usage = cls()
        for r in records:
            usage.add(r)
        return usage

    def exhausted(self, budget: Budget, llm: bool) -> str | None:
        """The first cap this usage has reached for a step that calls a policy (`llm`) or not; None if none."""
        caps = ("evaluations", "eval_seconds") + (("llm_calls", "tokens", "cost_usd") if llm else ())
        for cap in caps:
            limit = getattr(budget, cap)
            if limit is not None and getattr(self, cap) >= limit:
                return f"{cap} {getattr(self, cap):g} >= {limit:g}"
        return None
