"""The records every curation stage exchanges: a candidate problem, where it came from, and a decision."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Literal

Kind = Literal["kernelbench", "crawl", "synthetic", "variant"]


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a candidate came from: enough to trace it back and to honour its license."""

    kind: Kind
    path: str  # the source file (a KernelBench file, a crawled module's file) or "synthetic:<seed>/<index>"
    package: str | None = None
    version: str | None = None
    license: str | None = None
    symbol: str | None = None  # the crawled class, or the synthetic chain's name
    parent: str | None = None  # a shape variant's original candidate id


@dataclasses.dataclass(frozen=True)
class CandidateProblem:
    """A problem on its way through the pipeline. `alternatives` are further sources for the same problem
    (a crawled module's other input-shape guesses), tried in order by validation when `source` does not run."""

    id: str
    source: str
    origin: Origin
    level: int | None = None  # L0-L5 once the difficulty stage ran (or the generator's estimate)
    alternatives: tuple[str, ...] = ()
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # per-stage results (scores, baselines, ...)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def with_facts(self, **facts: Any) -> CandidateProblem:
        return dataclasses.replace(self, facts={**self.facts, **facts})


@dataclasses.dataclass(frozen=True)
class Decision:
    """One stage's decision about one candidate: every keep, reject and note is recorded."""

    problem: str
    stage: str
    decision: Literal["keep", "reject", "note"]
    reason: str = ""
    score: float | None = None
    collided_with: str | None = None  # the evaluation problem or kept candidate it duplicates
    source_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


class StageResult:
    """What a stage returns: the candidates it kept and the decisions it made about all of them."""

    def __init__(self, stage: str):
        self.stage = stage
        self.kept: list[CandidateProblem] = []
        self.decisions: list[Decision] = []

    def keep(self, c: CandidateProblem, reason: str = "", score: float | None = None) -> None:
        self.kept.append(c)
        self.decisions.append(Decision(c.id, self.stage, "keep", reason, score, source_path=c.origin.path))

    def reject(
        self, c: CandidateProblem, reason: str, score: float | None = None, collided_with: str | None = None
    ) -> None:
        self.decisions.append(Decision(c.id, self.stage, "reject", reason, score, collided_with, c.origin.path))

    def note(self, c: CandidateProblem, reason: str, score: float | None = None) -> None:
        self.decisions.append(Decision(c.id, self.stage, "note", reason, score, source_path=c.origin.path))
