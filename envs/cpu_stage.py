"""The CPU stage: a candidate's text to a `Candidate` to execute, or to its final Verdict without running it.

It runs where the answers arrive (the driver for the Ray pool, the caller's thread for `Evaluator`) and also does
the bookkeeping around an execution: verdict and baseline keys, the cache, the optional judge.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time

from envs.antihack import static as static_analysis
from envs.antihack.judge import LLMJudge, apply_judge
from envs.cache import SqliteCache, cache_key, judging_code_fingerprint
from envs.guard import StageFailure, guarded
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.source import CanonicalSolution, SourceError, prepare_solution
from envs.speedup import BASELINE_METHOD
from envs.verdict import HackFinding, Status, Verdict
from envs.worker.worker_set import resolve_device

__all__ = ["Candidate", "CpuStage", "profile_target"]

# Verdicts that may depend on the machine's state (or on our bugs) rather than the code are not cached.
_TRANSIENT = {Status.TIMEOUT, Status.CRASH, Status.REJECTED, Status.INTERNAL_ERROR}

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A solution that passed the CPU stage and must run on a worker; with `solution` None, a job that only
    measures its problem's baselines (`CpuStage.baseline_job`)."""

    problem: Problem
    solution: CanonicalSolution | None
    verdict_key: str
    baseline_key: str
    static_seconds: float


class CpuStage:
    """The CPU stage and the bookkeeping around execution: keys, cache, baselines."""

    def __init__(
        self, settings: EvalSettings, device_kind: str, cache: SqliteCache | None = None, judge: LLMJudge | None = None
    ):
        self.settings, self.device_kind, self.cache = settings, device_kind, cache
        self.judge = judge
        self.device = resolve_device(settings.device)
        self.size = settings.resolved_size(self.device)
        self._baselines: dict[str, dict] = {}  # used when there is no cache
        self._baseline_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)

    @property
    def device_name(self) -> str:
        return self.device_kind.split("|")[0]

    def prepare(self, problem: Problem, answer: str) -> Candidate | Verdict:
        """A Candidate to execute, or the final Verdict when nothing needs to run. Nothing in `answer` makes
        it raise: a stage that fails on the candidate gives its verdict (envs/guard.py)."""
        started = time.monotonic()
        checked = self._stage("extract", problem, self._extract, problem, answer)
        if isinstance(checked, CanonicalSolution):
            finding = self._stage(
                "static", problem, static_analysis.analyze, checked.source, problem.source, self.settings.cpu_stage
            )
            if isinstance(finding, HackFinding):
                finding = Verdict(
                    Status.HACK,
                    problem.id,
                    self.device_name,
                    error=f"{finding.category}: {finding.reason}",
                    hack=finding,
                )
            checked = finding or checked
        if isinstance(checked, Verdict):
            elapsed = time.monotonic() - started
            return dataclasses.replace(checked, phase_seconds={"static": elapsed, "total": elapsed})
        solution = checked
        base = self._problem_key(problem)
        verdict_key = self._verdict_key(base, solution)
        hit = self._cached(problem, solution, base, verdict_key)
        if hit is not None:
            return self._judged(dataclasses.replace(hit, cached=True), problem, solution)
        return Candidate(problem, solution, verdict_key, self._baseline_key(base), time.monotonic() - started)

    def _problem_key(self, problem: Problem) -> dict:
        sizes = problem.small_sizes if self.size == "small" else {}
        key = dict(problem=problem.sha256, sizes=sizes, device=self.device_kind)
        if self.device == "cuda":  # baselines and speedups measured another way are never mixed with these
            key["baselines"] = BASELINE_METHOD
        return key

    def _baseline_key(self, base: dict) -> str:
        # a launch allowance times the baselines another way (envs/timing.py); off, the key is as before it
        allowance = self.settings.launch_allowance_ms
        other = {"launch_allowance_ms": allowance} if allowance else {}
        return cache_key(**base, runs=self.settings.timed_runs, warmup_ms=self.settings.warmup_ms, **other)

    def baseline_job(self, problem: Problem) -> Candidate | None:
        """A job that measures `problem`'s baselines ahead of its candidates, or None when they are known or
        this device needs none (only CUDA times them)."""
        if self.device != "cuda":
            return None
        key = self._baseline_key(self._problem_key(problem))
        job = Candidate(problem, None, f"baselines:{key}", key, 0.0)
        return None if self.baselines(job) else job

    def _stage(self, stage: str, problem: Problem, fn, *args, **verdict_fields):
        """fn(*args), or the verdict of its failure on this candidate (envs/guard.py)."""
        result = guarded(stage, fn, *args)
        if isinstance(result, StageFailure):
            return result.verdict(problem.id, self.device_name, **verdict_fields)
        return result

    def _extract(self, problem: Problem, answer: str) -> CanonicalSolution | Verdict:
        try:
            return prepare_solution(answer, self.settings.cpu_stage)
        except SourceError as e:
            return Verdict(Status.COMPILE_ERROR, problem.id, self.device_name, error=str(e))

    def _verdict_key(self, base: dict, solution: CanonicalSolution, sandboxed: bool | None = None) -> str:
        settings = self.settings.cache_fields(self.device, sandboxed=sandboxed)
        return cache_key(**base, solution=solution.sha256, settings=settings, code=judging_code_fingerprint())

    def _cached(self, problem: Problem, solution: CanonicalSolution, base: dict, verdict_key: str) -> Verdict | None:
        """The cached verdict of this code, if any. A caller that does not require the sandbox may also use
        a verdict obtained under it; never the reverse. An unreadable entry is a miss (and is logged)."""
        if self.cache is None:
            return None
        for key in dict.fromkeys([verdict_key, self._verdict_key(base, solution, sandboxed=True)]):
            try:
                hit = self.cache.get_verdict(key)
                if hit is not None:
                    return Verdict.from_dict(hit)
            except Exception as e:  # the cache's fault, not the candidate's: evaluate it afresh
                log.warning(
                    "verdict cache entry for %s unreadable (%s: %s); evaluating afresh", problem.id, type(e).__name__, e
                )
        return None

    def baselines(self, candidate: Candidate) -> dict | None:
        """Known baseline timings for the candidate's problem (None: not measured yet, or not on CUDA)."""
        if self.cache is not None:
            return self.cache.get_baselines(candidate.baseline_key)
        return self._baselines.get(candidate.baseline_key)

    def baseline_lock(self, candidate: Candidate) -> threading.Lock:
        """Held while a problem's baselines are measured, so they are measured once."""
        return self._baseline_locks[candidate.baseline_key]

    def finish(
        self, candidate: Candidate, verdict: Verdict, measured_baselines: dict | None, started: float
    ) -> Verdict:
        """The worker's verdict with its phase times, cached, and reviewed by the judge. Total,
        like `prepare`: a failure here is the candidate's verdict."""
        return self._stage(
            "finish",
            candidate.problem,
            self._finish,
            candidate,
            verdict,
            measured_baselines,
            started,
            phase_seconds=verdict.phase_seconds,
        )

    def _finish(
        self, candidate: Candidate, verdict: Verdict, measured_baselines: dict | None, started: float
    ) -> Verdict:
        if measured_baselines:
            if self.cache is not None:
                self.cache.put_baselines(candidate.baseline_key, candidate.problem.id, measured_baselines)
            else:
                self._baselines[candidate.baseline_key] = measured_baselines
        phases = {
            "static": candidate.static_seconds,
            **verdict.phase_seconds,
            "total": time.monotonic() - started + candidate.static_seconds,
        }
        verdict = dataclasses.replace(verdict, phase_seconds=phases)
        if candidate.solution is None:  # a baselines-only job: nothing to cache or judge
            return verdict
        if self.cache is not None and verdict.status not in _TRANSIENT:
            self.cache.put_verdict(candidate.verdict_key, candidate.problem.id, verdict.to_dict())
        return self._judged(verdict, candidate.problem, candidate.solution)

    def _judged(self, verdict: Verdict, problem: Problem, solution: CanonicalSolution) -> Verdict:
        """The optional LLM judge reviews correct verdicts after the deterministic checks (its answers
        have their own cache, so the verdict cache keeps the deterministic verdict)."""
        if self.judge is None or not self.judge.config.enabled or not verdict.correct:
            return verdict
        return self._stage(
            "judge",
            problem,
            lambda: apply_judge(
                verdict, self.judge.judge(solution.source, problem.source), self.judge.config.can_zero_reward
            ),
            phase_seconds=verdict.phase_seconds,
        )


def profile_target(cpu_stage: CpuStage, problem: Problem, answer: str) -> CanonicalSolution | str:
    """The canonical solution `profile` runs (the answer must pass the CPU stage, like an evaluation), or why
    it cannot be profiled (a static finding, a syntax error)."""
    prepared = cpu_stage.prepare(problem, answer)
    if isinstance(prepared, Candidate):
        return prepared.solution
    if prepared.status is Status.CORRECT:  # a cached verdict: the code still has to run to be profiled
        return prepare_solution(answer, cpu_stage.settings.cpu_stage)  # it passed the same stage just now
    return f"{prepared.status.value}: {prepared.error}"
