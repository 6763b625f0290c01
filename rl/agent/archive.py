"""Selection: islands of MAP-Elites archives with ring migration, rebuilt from the store on resume.

Each island keeps, per kernel-feature cell (rl.agent.features), the candidate with the highest fitness (ties:
the earlier one). Proposer k works on island k mod islands, so islands evolve apart; every
`migration_interval` new candidates of a problem, each island's best elite is copied into the next island
(a ring), which spreads good kernels without collapsing the islands into one. Duplicates are never added.

Parents: with probability `exploit` the island's best elite, else an elite chosen uniformly (diversity).
Crossover takes a second parent from another cell, preferring another island's best.
"""

from __future__ import annotations

import dataclasses
import random

from rl.agent.features import fitness
from rl.agent.records import CandidateRecord

__all__ = ["Archive", "SelectionConfig"]


@dataclasses.dataclass(frozen=True)
class SelectionConfig:
    islands: int = 2
    migration_interval: int = 8  # new candidates of a problem between migrations; 0: never migrate
    exploit: float = 0.5  # probability of taking the island's best elite as parent

    def __post_init__(self) -> None:
        if self.islands < 1:
            raise ValueError("agent.selection.islands must be >= 1")
        if self.migration_interval < 0:
            raise ValueError("agent.selection.migration_interval must be >= 0")
        if not 0.0 <= self.exploit <= 1.0:
            raise ValueError("agent.selection.exploit must be within [0, 1]")


def _rank(record: CandidateRecord) -> tuple[float, int]:
    return (fitness(record.verdict, record.reward), -record.id)


class Archive:
    def __init__(self, config: SelectionConfig):
        self.config = config
        self.cells: list[dict[str, CandidateRecord]] = [{} for _ in range(config.islands)]
        self.added = 0  # non-duplicate candidates seen (drives migration)

    def _place(self, island: int, record: CandidateRecord) -> bool:
        cells = self.cells[island]
        current = cells.get(record.cell)
        if current is None or _rank(record) > _rank(current):
            cells[record.cell] = record
            return True
        return False

    def add(self, record: CandidateRecord) -> bool:
        """Offer a new candidate to its own island; True if it became an elite."""
        if record.duplicate_of is not None:
            return False
        self.added += 1
        return self._place(record.island % self.config.islands, record)

    def migrate_into(self, island: int, record: CandidateRecord) -> bool:
        return self._place(island, record)

    def migration_due(self) -> bool:
        n = self.config.migration_interval
        return self.config.islands > 1 and n > 0 and self.added > 0 and self.added % n == 0

    def migrations(self) -> list[tuple[CandidateRecord, int]]:
        """(candidate, destination) for one ring migration: each island's best elite into the next island."""
        out = []
        for island in range(self.config.islands):
            best = self.best(island)
            if best is not None:
                out.append((best, (island + 1) % self.config.islands))
        return out

    def elites(self, island: int | None = None) -> list[CandidateRecord]:
        islands = range(self.config.islands) if island is None else [island % self.config.islands]
        seen: dict[int, CandidateRecord] = {}
        for i in islands:
            for record in self.cells[i].values():
                seen.setdefault(record.id, record)
        return sorted(seen.values(), key=_rank, reverse=True)

    def best(self, island: int | None = None) -> CandidateRecord | None:
        elites = self.elites(island)
        return elites[0] if elites else None

    def select_parent(self, island: int, rng: random.Random, correct_only: bool = False) -> CandidateRecord | None:
        elites = [e for e in self.elites(island) if e.correct or not correct_only]
        if not elites:  # an island that has nothing yet borrows from the others
            elites = [e for e in self.elites() if e.correct or not correct_only]
        if not elites:
            return None
        if rng.random() < self.config.exploit:
            return elites[0]
        return rng.choice(elites)

    def select_pair(self, island: int, rng: random.Random) -> tuple[CandidateRecord, CandidateRecord] | None:
        first = self.select_parent(island, rng)
        if first is None:
            return None
        others = [e for e in self.elites() if e.cell != first.cell and e.id != first.id]
        if not others:
            return None
        foreign = [e for e in others if e.island % self.config.islands != island % self.config.islands]
        return first, (foreign or others)[0]
