"""Fit a problem set to the evaluator that will judge it, before any candidate runs: problems without
SMALL_SIZES whose inputs are large get derived small sizes where the evaluation runs at the small size (the
CPU interpreter: a KernelBench file at its full size exhausts the worker's memory), and degenerate problems (a constant,
input-independent or near-zero output, so a trivial answer would pass) are left out. Each problem left
out comes back with its reason, so a run reports it instead of failing. The benchmark, the agent and the
training loop call this; results are cached per problem."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from envs.problems import Problem, ProblemError
from envs.settings import EvalSettings
from envs.small_sizes import SizeSearch, size_large_problems

log = logging.getLogger(__name__)


def drop_degenerate(evaluator: Any, problems: list[Problem]) -> tuple[list[Problem], dict[str, str]]:
    """(problems kept, reason per problem left out) by `evaluator.validate_problems`, one problem at a time
    only when the whole set does not pass (the passing ones are cached by then)."""
    try:
        evaluator.validate_problems(problems)
        return problems, {}
    except ProblemError:
        pass
    kept, skipped = [], {}
    for p in problems:
        try:
            evaluator.validate_problems([p])
            kept.append(p)
        except ProblemError as e:
            skipped[p.id] = str(e).split("\n", 1)[-1].strip()
    return kept, skipped


def fit_problems(
    problems: list[Problem], settings: EvalSettings, cache: Any = None, search: SizeSearch = SizeSearch()
) -> tuple[list[Problem], dict[str, str]]:
    """`problems` ready for an evaluator with `settings`, and the reason per problem left out. Runs the
    references in isolated workers (untrusted code, like candidates): one on this machine's device."""
    from envs import Evaluator
    from envs.worker.worker_set import resolve_device

    skipped: dict[str, str] = {}
    if settings.resolved_size(resolve_device(settings.device)) == "small":
        sized, _, failed = size_large_problems(  # already small ones run as written
            problems,
            search,
            cache,
            settings.workers,
            announce=lambda n: log.info(
                "deriving small sizes for %d problem(s) without SMALL_SIZES (cached per problem)", n
            ),
        )
        skipped.update(failed)
        problems = [sized.get(p.sha256, p) for p in problems if p.id not in failed]
    if problems:
        log.info("checking %d problem(s) for degenerate outputs (cached per problem)", len(problems))
        with Evaluator(dataclasses.replace(settings, workers=1), cache=cache) as checker:
            problems, degenerate = drop_degenerate(checker, problems)
        skipped.update(degenerate)
    return problems, skipped
