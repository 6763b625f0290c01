"""SQLite store for verdicts and baseline timings, safe to share between threads and processes."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any


def cache_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


# Packages of envs/ that never judge a candidate: the curation pipeline, the HTTP service, the agent's tools and
# the built-in problems (a problem's own text is in every key already).
_NOT_JUDGING = {"data", "service", "tools", "builtin"}
_ENVS = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=4)
def judging_code_fingerprint(root: Path = _ENVS) -> str:
    """A hash of the code that judges a candidate (`root`, envs/, but the packages above): part of every verdict
    key, so a verdict cached by other code (a detector added since, a changed comparison or timing rule) is never
    served."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] not in _NOT_JUDGING:
            digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class CacheError(ValueError):
    """A cache path that cannot be opened as a SQLite database (a directory, another kind of file, no access);
    a ValueError, so the entry points report it as the bad setting it is."""


def open_sqlite(path: Path, *schema: str) -> tuple[sqlite3.Connection, threading.Lock]:
    """A SQLite database shared by the threads of one process (WAL: other processes may read and write it
    too), with `schema`'s CREATE TABLE statements applied; use the connection under the returned lock."""
    lock = threading.Lock()
    db = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        with lock, db:
            db.execute("PRAGMA journal_mode=WAL")
            for statement in schema:
                db.execute(statement)
    except (OSError, sqlite3.Error) as e:
        if db is not None:
            db.close()
        raise CacheError(f"{path}: cannot be used as a SQLite cache ({e})") from None
    return db, lock


class SqliteCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._db, self._lock = open_sqlite(
            self.path,
            "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, problem_id TEXT, "
            "verdict TEXT NOT NULL, created REAL NOT NULL)",
            "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, problem_id TEXT, "
            "timings TEXT NOT NULL, created REAL NOT NULL)",
        )

    def _get(self, table: str, column: str, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute(f"SELECT {column} FROM {table} WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _put(self, table: str, column: str, key: str, problem_id: str, value: dict) -> None:
        with self._lock, self._db:
            self._db.execute(
                f"INSERT OR REPLACE INTO {table} (key, problem_id, {column}, created) VALUES (?, ?, ?, ?)",
                (key, problem_id, json.dumps(value), time.time()),
            )

    def get_verdict(self, key: str) -> dict | None:
        return self._get("verdicts", "verdict", key)

    def put_verdict(self, key: str, problem_id: str, verdict: dict) -> None:
        self._put("verdicts", "verdict", key, problem_id, verdict)

    def get_baselines(self, key: str) -> dict | None:
        return self._get("baselines", "timings", key)

    def put_baselines(self, key: str, problem_id: str, timings: dict) -> None:
        self._put("baselines", "timings", key, problem_id, timings)

    def count(self, table: str = "verdicts") -> int:
        if table not in ("verdicts", "baselines"):
            raise ValueError(table)
        with self._lock:
            return self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
