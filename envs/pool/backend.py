"""The `Backend` interface: how the evaluation pool starts actors and runs candidates on them.

`RayBackend` (envs/pool/ray_backend.py) is the real one; tests use an in-process fake. Separate from the
pool (envs/pool/core.py) so that a backend depends on this contract only, not on the pool's machinery.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from envs.problems import Problem
from envs.settings import EvalSettings


class Backend:
    """How the pool starts actors and runs candidates on them."""

    device: str = "cpu"  # resolved: cpu | cuda

    def default_num_actors(self) -> int:
        raise NotImplementedError

    def launch(self, settings: EvalSettings) -> tuple[Any, dict]:
        """Start one actor and wait until it is ready: (handle, info). info holds at least
        `device_kind` and `workers` (its concurrency)."""
        raise NotImplementedError

    def execute(
        self, handle: Any, problem: Problem, solution: Any, baselines: dict | None
    ) -> concurrent.futures.Future:
        """Future of (verdict, measured baselines, actor stats)."""
        raise NotImplementedError

    def profile(self, handle: Any, problem: Problem, solution: Any, calls: int) -> concurrent.futures.Future:
        """Future of the actor's profile of a candidate ({"profile": facts} or {"error": why})."""
        raise NotImplementedError

    def is_actor_failure(self, exc: BaseException) -> bool:
        """The actor itself died or became unreachable (not an error raised by the evaluation)."""
        raise NotImplementedError

    def unwrap(self, exc: BaseException) -> BaseException:
        return exc

    def kill(self, handle: Any) -> None:
        """Force-stop an actor without waiting (its in-flight futures then fail as actor failures)."""
        raise NotImplementedError

    def stats(self, handles: dict[int, Any], timeout: float) -> dict[int, dict]:
        return {}

    def shutdown(self, handles: list[Any], graceful: bool) -> None:
        """Stop actors and their worker processes; blocks until done."""
        for h in handles:
            self.kill(h)

    def close(self, infos: list[dict]) -> None:
        """Release what the backend holds (after every actor is stopped)."""

    def exporter(self, name: str) -> Any:
        return None
