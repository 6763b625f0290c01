"""The boundary of each evaluation stage that reads a candidate's text in the driver.

Whatever a candidate makes a stage do (raise, recurse, exhaust memory, go over a bound) becomes that
candidate's verdict, never an exception in the caller: `rejected` when it went over a bound of the CPU
stage, `internal_error` when a stage failed on it (our bug, which the candidate found; kept for triage).
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from typing import Callable, TypeVar

from envs.verdict import Status, Verdict

T = TypeVar("T")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LimitExceeded(Exception):
    """The candidate is over a bound of the CPU stage; the message names the bound."""


class Budget:
    """One candidate's allowance in the static analysis: how deep resolution may nest, and for how long.

    The recursive questions the analysis asks (which paths a name denotes, which functions it may call)
    enter and leave the budget; honest code nests a few levels, so a bound far above that only stops
    programs built to be unanalysable, with a verdict instead of a RecursionError."""

    __slots__ = ("max_depth", "deadline", "seconds", "depth", "_calls")

    def __init__(self, max_depth: int, seconds: float):
        self.max_depth, self.seconds = max_depth, seconds
        self.deadline = time.monotonic() + seconds
        self.depth = self._calls = 0

    def enter(self) -> None:
        self.depth += 1
        self._calls += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"names refer to each other more than {self.max_depth} levels deep")
        if not self._calls & 255 and time.monotonic() > self.deadline:
            raise LimitExceeded(f"the static analysis took over {self.seconds:g} s")

    def leave(self) -> None:
        self.depth -= 1


@dataclasses.dataclass(frozen=True)
class StageFailure:
    """What a stage did instead of returning: the verdict's status, its error text, the traceback."""

    stage: str
    status: Status
    error: str
    traceback: str | None = None

    def verdict(self, problem_id: str, device: str, **fields) -> Verdict:
        return Verdict(self.status, problem_id, device, error=self.error, traceback=self.traceback, **fields)


def innermost_frame(e: BaseException) -> str:
    """`path:line in function` of the frame that raised, with the path relative to the checkout."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return "unknown frame"
    f = frames[-1]
    path = os.path.relpath(f.filename, _ROOT) if f.filename.startswith(_ROOT) else f.filename
    return f"{path}:{f.lineno} in {f.name}"


def failure_of(stage: str, e: BaseException) -> StageFailure:
    """The verdict-to-be of a stage that raised `e` on a candidate."""
    if isinstance(e, LimitExceeded):
        return StageFailure(stage, Status.REJECTED, f"{stage}: {e}")
    message = str(e).splitlines()[0][:300] if str(e) else ""
    error = f"{stage}: {type(e).__name__}{': ' + message if message else ''} at {innermost_frame(e)}"
    # The last frames say where it failed; a RecursionError's thousand frames repeat a few.
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-40))
    return StageFailure(stage, Status.INTERNAL_ERROR, error, tb)


def guarded(stage: str, fn: Callable[..., T], *args, **kwargs) -> T | StageFailure:
    """`fn(*args, **kwargs)`, or the StageFailure it ended in. Exceptions, RecursionError and MemoryError
    included, are the candidate's outcome here: the stage's caller only ever sees a value."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        return failure_of(stage, e)
