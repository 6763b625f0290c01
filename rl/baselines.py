"""The order in which a run has its problems' baselines measured, and the log lines when they are.

A GPU pool times each problem's eager and TorchInductor baselines once (`KernelEvaluator.prepare_baselines`). The
loop queues them all when the run starts, the ones needed first (validation's at step 0, the first step's) ahead of
the rest, all at the pool's background rank: a candidate whose problem's job is still queued lends it its rank
(envs/pool/scheduler.py), so jobs nobody needs yet never hold back candidates that are waiting.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from typing import Iterable

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from rl.data import ProblemSampler

log = logging.getLogger(__name__)

__all__ = ["baseline_groups", "prepare_baselines"]


def baseline_groups(
    problems: Iterable[Problem], validation: list[Problem], sampler: ProblemSampler, steps: Iterable[int], per_step: int
) -> tuple[list[Problem], list[Problem]]:
    """(the problems needed first: `validation`'s, then what `sampler` draws next for `steps`; every other one of
    `problems`), each in order and without repeats. The sampler is only peeked at: its draws are unchanged."""
    needed = _unique([*validation, *sampler.peek(steps, per_step)])
    first = {p.id for p in needed}
    return needed, [p for p in _unique(problems) if p.id not in first]


def prepare_baselines(pool: KernelEvaluator, needed: list[Problem], rest: list[Problem], needed_what: str) -> None:
    """Queue the baselines of `needed`, then of `rest`, at the background rank; log when the needed ones have
    ended (`needed_what` names them) and when all have."""
    started = time.perf_counter()
    first = pool.prepare_baselines(needed, priority="baseline")
    later = pool.prepare_baselines(rest, priority="baseline")
    _log_when_ended(first, started, f"{needed_what} {len(first)} problem(s)")
    _log_when_ended(first + later, started, f"{len(first) + len(later)} problem(s)")


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return list({p.id: p for p in problems}.values())


# Where a baseline job's seconds go (the worker's phases and steps), named as the log line shows them.
_PHASES = (
    ("queue", "queued"),
    ("gpu_wait", "waiting for the GPU"),
    ("baseline.inductor_compile", "Inductor compile"),
    ("baseline.eager", "eager timed"),
    ("baseline.inductor", "Inductor timed"),
    ("baseline.anchor_reference", "anchor reference and Inductor timed"),
    ("total", "in all"),
)


def _log_when_ended(futures: list[concurrent.futures.Future], started: float, what: str) -> None:
    """One log line once every future has ended: how long since `started`, how many did not run the reference
    (and how many the run's end cancelled), and the measured jobs' mean seconds by phase."""
    if not futures:
        return
    lock = threading.Lock()
    count = {"left": len(futures), "failed": 0, "cancelled": 0, "measured": 0}
    phases: dict[str, float] = {}

    def ended(future: concurrent.futures.Future) -> None:
        cancelled = future.cancelled()
        verdict = None if cancelled or future.exception() is not None else future.result()
        with lock:
            count["left"] -= 1
            if cancelled:
                count["cancelled"] += 1
            elif verdict is None or not verdict.correct:
                count["failed"] += 1
            else:
                count["measured"] += 1
                for key, _ in _PHASES:
                    phases[key] = phases.get(key, 0.0) + verdict.phase_seconds.get(key, 0.0)
            if count["left"]:
                return
        n = max(count["measured"], 1)
        where = ", ".join(f"{name} {phases[key] / n:.1f}" for key, name in _PHASES if phases.get(key))
        log.info(
            "baselines of %s measured in %.1f s (%d failed%s); per problem, s: %s",
            what,
            time.perf_counter() - started,
            count["failed"],
            f", {count['cancelled']} cancelled: the run ended first" if count["cancelled"] else "",
            where or "-",
        )

    for future in futures:
        future.add_done_callback(ended)
