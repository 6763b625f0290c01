"""SQLite store of verified kernels: what `kernel_search` (envs/tools/search.py) retrieves from.

Every row is a solution the evaluator judged `correct` (the built-in references, and whatever training,
the benchmark or the agent found), with the problem's source, the measured speedup (None on CPU) and
where it came from. It lives beside the verdict cache (`solutions.sqlite` next to `verdicts.sqlite`),
with the same concurrency settings (WAL, one connection per store, a lock per connection).

`split` records which side of the train/validation/benchmark split the problem was on when the solution
was found, so that searches made while training or benchmarking can leave held-out problems out
(the leakage rules themselves live in envs.retrieval.KernelIndex).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Iterable

from envs.cache import open_sqlite
from envs.problems import Problem
from envs.verdict import Verdict
from envs.retrieval import SolvedKernel

__all__ = ["SolutionStore", "default_solutions_path"]

_SPLITS = ("train", "validation", "benchmark", "reference")


def default_solutions_path(verdict_cache_path: str | Path | None) -> Path | None:
    """`solutions.sqlite` in the verdict cache's directory (None without a cache)."""
    return None if verdict_cache_path is None else Path(verdict_cache_path).with_name("solutions.sqlite")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class SolutionStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._db, self._lock = open_sqlite(
            self.path,
            "CREATE TABLE IF NOT EXISTS solutions (problem_sha256 TEXT NOT NULL, solution_sha256 TEXT NOT NULL, "
            "problem_id TEXT NOT NULL, problem_source TEXT NOT NULL, solution TEXT NOT NULL, speedup REAL, "
            "device TEXT, split TEXT NOT NULL, provenance TEXT NOT NULL, created REAL NOT NULL, "
            "PRIMARY KEY (problem_sha256, solution_sha256))",
        )

    def add(self, record: SolvedKernel, split: str, device: str = "cpu") -> bool:
        """Store a verified solution; True if it was new. A solution already stored keeps its first
        provenance, and its speedup becomes the best measured."""
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {_SPLITS}, not {split!r}")
        key = (record.problem_sha256, _sha(record.solution))
        with self._lock, self._db:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO solutions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    record.problem_id,
                    record.problem_source,
                    record.solution,
                    record.speedup,
                    device,
                    split,
                    record.provenance,
                    time.time(),
                ),
            )
            if cursor.rowcount == 0 and record.speedup is not None:
                self._db.execute(
                    "UPDATE solutions SET speedup = MAX(COALESCE(speedup, 0), ?) "
                    "WHERE problem_sha256 = ? AND solution_sha256 = ?",
                    (record.speedup, *key),
                )
            return cursor.rowcount == 1

    def add_verified(
        self, problem: Problem, solution_source: str, verdict: Verdict, split: str, provenance: str
    ) -> bool:
        """Store `solution_source` if `verdict` says it is correct (anything else is refused: False)."""
        if not verdict.correct:
            return False
        return self.add(
            SolvedKernel(problem.id, problem.source, solution_source, verdict.speedup, provenance),
            split,
            verdict.device,
        )

    def seed(self, records: Iterable[SolvedKernel]) -> int:
        """Add reference solutions (e.g. envs.retrieval.builtin_solutions()); returns how many were new."""
        return sum(self.add(r, "reference") for r in records)

    def records(self, exclude_splits: Iterable[str] = ()) -> list[SolvedKernel]:
        """Every stored solution (oldest first), less those found on the excluded splits."""
        excluded = tuple(exclude_splits)
        query = "SELECT problem_id, problem_source, solution, speedup, provenance FROM solutions"
        if excluded:
            query += f" WHERE split NOT IN ({','.join('?' * len(excluded))})"
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created, problem_id", excluded).fetchall()
        return [SolvedKernel(*row) for row in rows]

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM solutions").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
