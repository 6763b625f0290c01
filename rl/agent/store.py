"""Per-problem populations in one SQLite file: every candidate with its parents, operator, prompt, verdict and cost.

Resuming is reading it back: the search rebuilds its archive, bandit and budget use from the rows, so a run that
was stopped (or crashed) continues where it was, and a finished one can be given more budget. A problem is bound
to its source hash on first use; reopening the store with a changed problem under the same id is refused (its
old verdicts would be about another computation).

Migrations (a candidate copied into another island's archive) are rows too, so the archive after a resume is
the archive before it. So are the GPU profiles of mutation parents (rl.agent.profiles), one per kernel: a kernel
is profiled once, and their count and seconds are budget use on resume.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from envs.cache import open_sqlite
from envs.problems import Problem
from envs.verdict import Verdict
from rl.agent.records import CandidateRecord, Proposal

__all__ = ["PopulationStore", "StoreError"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS problems (problem_id TEXT PRIMARY KEY, problem_sha256 TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS candidates (id INTEGER PRIMARY KEY AUTOINCREMENT, problem_id TEXT NOT NULL, "
    "operator TEXT NOT NULL, strategy TEXT NOT NULL, policy TEXT NOT NULL, parents TEXT NOT NULL, "
    "prompt TEXT, text TEXT NOT NULL, source_sha256 TEXT NOT NULL, verdict TEXT NOT NULL, status TEXT NOT NULL, "
    "speedup REAL, reward REAL NOT NULL, island INTEGER NOT NULL, cell TEXT NOT NULL, "
    "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL, "
    "generate_seconds REAL NOT NULL, finish_reason TEXT, eval_seconds REAL NOT NULL, duplicate_of INTEGER, "
    "created REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS candidates_problem ON candidates (problem_id, id)",
    "CREATE TABLE IF NOT EXISTS migrations (problem_id TEXT NOT NULL, candidate_id INTEGER NOT NULL, "
    "island INTEGER NOT NULL, after_id INTEGER NOT NULL, PRIMARY KEY (problem_id, candidate_id, island))",
    "CREATE TABLE IF NOT EXISTS profiles (problem_id TEXT NOT NULL, source_sha256 TEXT NOT NULL, "
    "result TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL, PRIMARY KEY (problem_id, source_sha256))",
)


class StoreError(ValueError):
    """The store cannot be used as asked (a problem changed under its id, an unknown candidate)."""


class PopulationStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._db, self._lock = open_sqlite(self.path, *_SCHEMA)

    def bind(self, problem: Problem) -> None:
        """Record `problem`'s source hash, or check it against the one recorded."""
        with self._lock, self._db:
            row = self._db.execute("SELECT problem_sha256 FROM problems WHERE problem_id = ?", (problem.id,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO problems VALUES (?, ?)", (problem.id, problem.sha256))
            elif row[0] != problem.sha256:
                raise StoreError(
                    f"{self.path}: problem {problem.id} changed since its population was stored "
                    f"(sha256 {row[0][:12]} -> {problem.sha256[:12]}); use a new store (agent.store)"
                )

    def find(self, problem_id: str, source_sha256: str) -> CandidateRecord | None:
        """The first evaluated (non-duplicate) candidate of `problem_id` with this kernel."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM candidates WHERE problem_id = ? AND source_sha256 = ? AND "
                "duplicate_of IS NULL ORDER BY id LIMIT 1",
                (problem_id, source_sha256),
            ).fetchone()
        return None if row is None else self._record(row)

    def add(
        self,
        problem_id: str,
        proposal: Proposal,
        source_sha256: str,
        verdict: Verdict,
        island: int,
        cell: str,
        eval_seconds: float,
        duplicate_of: int | None = None,
        reward: float = 0.0,
    ) -> CandidateRecord:
        p = proposal
        created = time.time()
        with self._lock, self._db:
            cursor = self._db.execute(
                "INSERT INTO candidates (problem_id, operator, strategy, policy, parents, prompt, text, "
                "source_sha256, verdict, status, speedup, reward, island, cell, prompt_tokens, completion_tokens, "
                "cost_usd, generate_seconds, finish_reason, eval_seconds, duplicate_of, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    problem_id,
                    p.operator,
                    p.strategy,
                    p.policy,
                    json.dumps(list(p.parents)),
                    None if p.prompt is None else json.dumps(p.prompt),
                    p.text,
                    source_sha256,
                    json.dumps(verdict.to_dict(), default=str),
                    verdict.status.value,
                    verdict.speedup,
                    reward,
                    island,
                    cell,
                    p.prompt_tokens,
                    p.completion_tokens,
                    p.cost_usd,
                    p.generate_seconds,
                    p.finish_reason,
                    eval_seconds,
                    duplicate_of,
                    created,
                ),
            )
            new_id = cursor.lastrowid
        return CandidateRecord(
            new_id,
            problem_id,
            proposal,
            source_sha256,
            verdict,
            island,
            cell,
            eval_seconds,
            duplicate_of,
            created,
            reward,
        )

    def candidates(self, problem_id: str) -> list[CandidateRecord]:
        """Every candidate of `problem_id` in insertion order (duplicates included)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM candidates WHERE problem_id = ? ORDER BY id", (problem_id,)
            ).fetchall()
        return [self._record(r) for r in rows]

    def get(self, candidate_id: int) -> CandidateRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no candidate {candidate_id}")
        return self._record(row)

    def add_migration(self, problem_id: str, candidate_id: int, island: int, after_id: int) -> bool:
        """Record that `candidate_id` joined `island`'s archive right after candidate `after_id` was added."""
        with self._lock, self._db:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO migrations VALUES (?, ?, ?, ?)", (problem_id, candidate_id, island, after_id)
            )
            return cursor.rowcount == 1

    def migrations(self, problem_id: str) -> list[tuple[int, int, int]]:
        """(candidate id, destination island, after id) in the order they happened."""
        with self._lock:
            return [
                tuple(r)
                for r in self._db.execute(
                    "SELECT candidate_id, island, after_id FROM migrations WHERE problem_id = ? "
                    "ORDER BY after_id, rowid",
                    (problem_id,),
                ).fetchall()
            ]

    def add_profile(self, problem_id: str, source_sha256: str, result: dict, seconds: float) -> None:
        """Remember a kernel's profile result ({"profile": facts} or {"error": why}: a failure is not retried)."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?, ?)",
                (problem_id, source_sha256, json.dumps(result, default=str), seconds, time.time()),
            )

    def profile(self, problem_id: str, source_sha256: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT result FROM profiles WHERE problem_id = ? AND source_sha256 = ?", (problem_id, source_sha256)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def profile_usage(self, problem_id: str) -> tuple[int, float]:
        """(profiles run, their seconds) for `problem_id`: budget use a resumed run starts with."""
        with self._lock:
            count, seconds = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(seconds), 0) FROM profiles WHERE problem_id = ?", (problem_id,)
            ).fetchone()
        return int(count), float(seconds)

    def problem_ids(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT problem_id FROM problems ORDER BY problem_id")]

    @staticmethod
    def _record(row: tuple) -> CandidateRecord:
        (
            cid,
            problem_id,
            operator,
            strategy,
            policy,
            parents,
            prompt,
            text,
            sha,
            verdict,
            _status,
            _speedup,
            reward,
            island,
            cell,
            prompt_tokens,
            completion_tokens,
            cost,
            gen_s,
            finish,
            eval_s,
            dup,
            created,
        ) = row
        proposal = Proposal(
            operator,
            text,
            strategy,
            policy,
            tuple(json.loads(parents)),
            None if prompt is None else json.loads(prompt),
            prompt_tokens,
            completion_tokens,
            cost,
            gen_s,
            finish,
        )
        return CandidateRecord(
            cid,
            problem_id,
            proposal,
            sha,
            Verdict.from_dict(json.loads(verdict)),
            island,
            cell,
            eval_s,
            dup,
            created,
            reward,
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()
