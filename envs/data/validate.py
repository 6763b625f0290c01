"""Stages: normalize (the KernelBench format, parsed without running) and validate (run in an evaluation
worker: builds, runs, deterministic, output not degenerate: the worker's `check_problem`, the same check
every problem set gets when it is loaded for evaluation).

A candidate without SMALL_SIZES (a KernelBench-format file carries only GPU sizes) gets them derived by
`envs.small_sizes.derive_small_sizes`, which runs the reference at the candidates sizes in the same worker
and checks it the same way; the derived sizes are written into the kept source, so the curated set runs on
the CPU interpreter as it is. A candidate with alternatives (a crawled module's other input guesses) keeps
the first source that passes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import logging

from envs.cache import SqliteCache, cache_key
from envs.data.records import CandidateProblem, StageResult
from envs.problems import ProblemError, parse_problem
from envs.small_sizes import SizeError, SizeSearch, derive_small_sizes
from envs.worker.worker_set import EvaluatorError, WorkerSet

__all__ = ["normalize", "validate"]

log = logging.getLogger(__name__)
# Part of the cache key: bump it when what the worker's problem check does changes.
_CHECK_VERSION = "curate_validate/v2-rng-determinism"


def normalize(candidates: list[CandidateProblem]) -> StageResult:
    """Parse every source as a problem (no code runs); drop alternatives that do not parse."""
    result = StageResult("normalize")
    seen: set[str] = set()
    for c in candidates:
        if c.id in seen:
            result.reject(c, "duplicate candidate id (two sources produced the same name)")
            continue
        seen.add(c.id)
        good, errors = [], []
        for source in (c.source, *c.alternatives):
            try:
                parse_problem(source, c.id)
                good.append(source)
            except ProblemError as e:
                errors.append(str(e))
        if not good:
            result.reject(c, f"not a KernelBench-format problem: {errors[0]}")
            continue
        result.keep(dataclasses.replace(c, source=good[0], alternatives=tuple(good[1:])), "parses as a problem")
    return result


def _with_small_sizes(source: str, sizes: dict) -> str:
    return (
        source.rstrip() + f"\n\n# Derived by the curation pipeline (envs.small_sizes) for the CPU interpreter.\n"
        f"SMALL_SIZES = {sizes!r}\n"
    )


def _check(pool: WorkerSet, c: CandidateProblem, source: str, search: SizeSearch) -> tuple[str | None, str]:
    """(None, the source to keep) when the problem runs and is usable, else (why not, source)."""
    problem = parse_problem(source, c.id)
    try:
        if not problem.small_sizes and pool.device != "cuda":
            derived = derive_small_sizes(problem, pool, search)
            return None, _with_small_sizes(source, derived.sizes)
        reason = pool.check_problem(problem)
    except SizeError as e:
        return f"no small size runs: {str(e)[:400]}", source
    except EvaluatorError as e:
        return f"does not run: {str(e)[:400]}", source
    return (f"degenerate: {reason}" if reason else None), source


def _cached_check(
    pool: WorkerSet, c: CandidateProblem, source: str, search: SizeSearch, cache: SqliteCache | None
) -> tuple[str | None, str]:
    """_check, remembered per (source, device, settings) in the verdict cache: a re-run of the pipeline over a
    grown crawl runs only what is new."""
    if cache is None:
        return _check(pool, c, source, search)
    key = cache_key(
        check=_CHECK_VERSION,
        source=hashlib.sha256(source.encode()).hexdigest(),
        device=pool.device_kind,
        families=list(pool.settings.input_families),
        search=search.key(),
    )
    if (hit := cache.get_verdict(key)) is not None:
        return hit["why"], hit["source"]
    why, kept = _check(pool, c, source, search)
    cache.put_verdict(key, c.id, {"why": why, "source": kept})
    return why, kept


def validate(
    candidates: list[CandidateProblem],
    pool: WorkerSet,
    search: SizeSearch = SizeSearch(),
    cache: SqliteCache | None = None,
) -> StageResult:
    result = StageResult("validate")

    def one(c: CandidateProblem) -> tuple[CandidateProblem, str | None, list[str]]:
        failures = []
        for i, source in enumerate((c.source, *c.alternatives)):
            why, kept = _cached_check(pool, c, source, search, cache)
            if why is None:
                return (
                    dataclasses.replace(c, source=kept, alternatives=(), facts={**c.facts, "validated_with": i}),
                    None,
                    failures,
                )
            failures.append(why)
        return c, failures[-1], failures

    with concurrent.futures.ThreadPoolExecutor(max(1, pool.size)) as ex:
        for n, (c, why, failures) in enumerate(ex.map(one, candidates), 1):
            if n % 100 == 0:
                log.info("validate: %d/%d checked", n, len(candidates))
            if why is not None:
                detail = why if len(failures) == 1 else f"none of {len(failures)} input guesses works; last: {why}"
                result.reject(c, detail)
                continue
            for i, failure in enumerate(failures):
                result.note(c, f"input guess {i} rejected: {failure}")
            result.keep(c, "runs, deterministic, not degenerate")
    return result
