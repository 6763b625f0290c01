"""The benchmark's modes on any rollout engine: single attempt, k independent samples, and up to N refinement
attempts in which the policy sees the evaluator's verdict on its previous answer (the paper's 1 and 3 attempts).

    round 0:  one request per problem with n = samples           -> evaluate every sample
    round r:  one request per sample whose chain is still open   -> [..., answer, feedback] -> evaluate
A chain closes when its answer is correct (unless `refine_correct`: keep asking for a faster kernel).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, Callable, Iterable

from envs.problems import Problem
from envs.verdict import Verdict
from rl.bench.metrics import AttemptRecord, ProblemResult
from rl.types import Message, RolloutRequest, Sample, SamplingConfig

__all__ = ["RunSettings", "RunStats", "feedback_message", "run_benchmark"]

log = logging.getLogger("kernelrl.bench")

EvaluateMany = Callable[[list[tuple[Problem, str]]], list[Verdict]]


@dataclasses.dataclass(frozen=True)
class RunSettings:
    samples: int = 1  # independent samples per problem (pass@k from these)
    attempts: int = 1  # refinement budget per sample: 1 = single attempt
    refine_correct: bool = False  # keep refining correct answers (for speed) instead of stopping
    feedback_chars: int = 2000  # evaluator error text shown to the policy, at most
    history: str = "last"  # last: the first prompt + the latest answer and its verdict (bounded length); all
    sampling: SamplingConfig = SamplingConfig(n=1, temperature=0.0, max_tokens=1024)

    def __post_init__(self) -> None:
        if self.samples < 1 or self.attempts < 1:
            raise ValueError("benchmark samples and attempts must be >= 1")
        if self.history not in ("last", "all"):
            raise ValueError(f"refinement history must be last or all, not {self.history!r}")


@dataclasses.dataclass
class RunStats:
    generate_seconds: float = 0.0
    evaluate_seconds: float = 0.0
    rounds: int = 0


def feedback_message(verdict: Verdict, limit: int) -> str:
    """The user turn that follows an answer in a refinement chain: what the evaluator found, verbatim."""
    lines = [f"The evaluator ran your ModelNew: status `{verdict.status.value}`."]
    if verdict.hack is not None:
        lines.append(f"It was rejected as `{verdict.hack.category}`: {verdict.hack.reason}")
    if verdict.correct:
        if verdict.speedup is not None:
            lines.append(
                f"It is correct; speedup over {verdict.baseline or 'the baseline'}: {verdict.speedup:.3f}x. "
                "Make it faster while keeping it correct."
            )
        else:
            lines.append("It is correct (no timing on this machine). Make it faster while keeping it correct.")
    elif verdict.error:
        error = verdict.error if len(verdict.error) <= limit else verdict.error[:limit] + "\n[... truncated]"
        lines.append(f"Error:\n```\n{error}\n```")
    lines.append("Answer again with the complete corrected solution in one fenced python block.")
    return "\n".join(lines)


async def _collect(engine: Any, requests: list[RolloutRequest]) -> list[Sample]:
    if not requests:
        return []
    return [s async for s in engine.generate(requests)]


def _record(sample: Sample, attempt: int, verdict: Verdict) -> AttemptRecord:
    usage = sample.usage or {}
    return AttemptRecord(
        sample=sample.index,
        attempt=attempt,
        verdict=verdict,
        prompt_tokens=int(usage.get("prompt_tokens") or len(sample.prompt_ids)),
        completion_tokens=int(usage.get("completion_tokens") or len(sample.completion_ids)),
        cost_usd=usage.get("cost_usd"),
        generate_seconds=sample.seconds,
        finish_reason=sample.finish_reason,
        text=sample.text,
    )


async def run_benchmark(
    problems: Iterable[Problem],
    engine: Any,
    first_messages: Callable[[Problem], list[Message]],
    evaluate_many: EvaluateMany,
    settings: RunSettings,
    sizes: dict[str, dict] | None = None,
) -> tuple[list[ProblemResult], RunStats]:
    """Run every mode's rounds; results in problem order. `first_messages(problem)` builds the first prompt."""
    problems = list(problems)
    by_id = {p.id: p for p in problems}
    if len(by_id) != len(problems):
        raise ValueError("the benchmark's problem list holds a problem id twice")
    stats = RunStats()
    records: dict[str, list[AttemptRecord]] = {p.id: [] for p in problems}
    history: dict[tuple[str, int], list[Message]] = {}
    first = {p.id: first_messages(p) for p in problems}
    requests = [
        RolloutRequest(f"{p.id}/a0", p.id, first[p.id], dataclasses.replace(settings.sampling, n=settings.samples))
        for p in problems
    ]
    chain: dict[str, int] = {}
    for attempt in range(settings.attempts):
        t = time.perf_counter()
        samples = await _collect(engine, requests)
        if attempt > 0:  # refinement requests carry one sample each (index 0): give it its chain's index
            samples = [dataclasses.replace(s, index=chain[s.request_id]) for s in samples]
        stats.generate_seconds += time.perf_counter() - t
        samples.sort(key=lambda s: (s.problem_id, s.index))
        t = time.perf_counter()
        verdicts = await asyncio.to_thread(evaluate_many, [(by_id[s.problem_id], s.text) for s in samples])
        stats.evaluate_seconds += time.perf_counter() - t
        stats.rounds += 1
        requests, chain = [], {}  # chain: request id -> the sample index it continues
        for sample, verdict in zip(samples, verdicts):
            records[sample.problem_id].append(_record(sample, attempt, verdict))
            key = (sample.problem_id, sample.index)
            if attempt == 0 or settings.history == "last":
                history[key] = list(first[sample.problem_id])
            history[key] = [
                *history[key],
                {"role": "assistant", "content": sample.text},
                {"role": "user", "content": feedback_message(verdict, settings.feedback_chars)},
            ]
            if attempt + 1 < settings.attempts and (settings.refine_correct or not verdict.correct):
                request_id = f"{sample.problem_id}/s{sample.index}/a{attempt + 1}"
                chain[request_id] = sample.index
                requests.append(
                    RolloutRequest(
                        request_id, sample.problem_id, history[key], dataclasses.replace(settings.sampling, n=1)
                    )
                )
        if not requests:
            break
        log.info("refinement round %d: %d open chains", attempt + 1, len(requests))
    sizes = sizes or {}
    return [ProblemResult(p.id, p.level, tuple(records[p.id]), sizes.get(p.id)) for p in problems], stats
