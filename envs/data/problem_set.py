"""Reading a curated set back: its problems with the levels and sampling weights its manifest records. The
manifest reader and `load_curated` live in envs/problems.py (its `load_problem_set` needs them for any directory
holding a manifest.jsonl); this module adds the sampling weights."""

from __future__ import annotations

from pathlib import Path

from envs.problems import MANIFEST, is_curated_set, load_curated, read_manifest

__all__ = ["MANIFEST", "is_curated_set", "read_manifest", "load_curated", "curated_weights"]


def curated_weights(directory: str | Path) -> dict[str, float]:
    """Problem id -> sampling weight (ids without one are left out)."""
    return {pid: float(e["weight"]) for pid, e in read_manifest(directory).items() if e.get("weight") is not None}
