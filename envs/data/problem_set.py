"""Reading a curated set back: its problems (the directory loader) with the levels and sampling weights its
manifest records. `envs.problems.load_problem_set` uses this for any directory holding a manifest.jsonl."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from envs.problems import Problem, ProblemError, load_problem_dir

__all__ = ["is_curated_set", "read_manifest", "load_curated", "curated_weights"]

MANIFEST = "manifest.jsonl"


def is_curated_set(directory: str | Path) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def read_manifest(directory: str | Path) -> dict[str, dict]:
    path = Path(directory) / MANIFEST
    entries: dict[str, dict] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entries[str(entry["id"])] = entry
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ProblemError(f"{path}:{n}: not a manifest line (a JSON object with an id)") from None
    return entries


def load_curated(directory: str | Path, levels: list[int] | None = None) -> list[Problem]:
    manifest = read_manifest(directory)
    problems = []
    for p in load_problem_dir(directory):
        entry = manifest.get(p.id)
        if entry is None:
            raise ProblemError(f"{directory}: {p.id}.py is not in {MANIFEST} (a curated set's files and manifest "
                               "must agree)")
        level = entry.get("level")
        problems.append(dataclasses.replace(p, level=int(level) if level is not None else None))
    return [p for p in problems if levels is None or p.level in levels]


def curated_weights(directory: str | Path) -> dict[str, float]:
    """Problem id -> sampling weight (ids without one are left out)."""
    return {pid: float(e["weight"]) for pid, e in read_manifest(directory).items() if e.get("weight") is not None}
