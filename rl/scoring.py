"""Generation with rewards overlapping it: every finished sample goes to the evaluation pool at once.

    result = await generate_and_score(engine, requests, problems, pool, reward_config, priority="train")
    result = await generate_and_score(..., overlap=False)   # evaluation starts once the engine is done
    result.groups                      one Group per request, samples in index order
    result.generate_s                  first request sent -> last sample out of the engine
    result.wait_for_rewards_s          last sample out -> last reward in (what overlap leaves on the table)
    result.evaluate_s                  first sample submitted -> last verdict (the evaluation's span)

While the engine keeps generating the batch's other samples, the pool's actors are already running
the finished ones; the loop only waits for the rewards of the last few samples. `overlap=False` holds
the samples until the engine has finished the round: where the engine and the pool's workers share the same
cores (the CPU recipe), an evaluation process preempts one of the engine's OpenMP threads and every parallel
region waits for it, so overlapping made generation about twice as slow (docs/training-notes.md, session 23).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from rewards.shaping import RewardConfig, shaped_reward
from rl.types import Group, RolloutRequest, Sample, ScoredSample

__all__ = ["EngineFailure", "RolloutResult", "generate_and_score"]


class EngineFailure(RuntimeError):
    """The rollout engine failed (its actor died, its server refused): the loop may rebuild it and retry.
    Failures of the evaluation pool are not wrapped: they stop the run."""


@dataclasses.dataclass(frozen=True)
class RolloutResult:
    groups: list[Group]
    generate_s: float
    evaluate_s: float
    wait_for_rewards_s: float
    completion_tokens: int
    trajectories: list[Any] = dataclasses.field(default_factory=list)  # rl.rollout.trajectory_record.Trajectory
    gate_wait_s: float = 0.0  # of generate_s, the engine's wait for the evaluation's timing windows (same GPU)

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.generate_s if self.generate_s > 0 else 0.0


async def _score(
    sample: Sample, problem: Problem, pool: KernelEvaluator, reward: RewardConfig, max_tokens: int, priority: str
) -> tuple[ScoredSample, float]:
    verdict = await pool.evaluate_async(problem, sample.text, priority=priority)
    value, parts = shaped_reward(verdict, sample.text, len(sample.completion_ids), max_tokens, reward)
    return ScoredSample(sample, verdict, value, parts), time.perf_counter()


async def generate_and_score(
    engine: Any,
    requests: list[RolloutRequest],
    problems: Mapping[str, Problem],
    pool: KernelEvaluator,
    reward: RewardConfig,
    priority: str = "train",
    overlap: bool = True,
) -> RolloutResult:
    start = time.perf_counter()
    pending: list[asyncio.Task] = []
    held: list[Sample] = []  # overlap=False: the samples wait here until the engine is done
    first_submit: float | None = None
    max_tokens = {r.request_id: r.sampling.max_tokens for r in requests}

    def submit(sample: Sample) -> None:
        nonlocal first_submit
        first_submit = first_submit or time.perf_counter()
        pending.append(
            asyncio.create_task(
                _score(sample, problems[sample.problem_id], pool, reward, max_tokens[sample.request_id], priority)
            )
        )

    try:
        try:
            async for sample in engine.generate(requests):
                if overlap:
                    submit(sample)
                else:
                    held.append(sample)
        except Exception as e:
            raise EngineFailure(f"{type(e).__name__}: {e}") from e
        generated = time.perf_counter()
        for sample in held:
            submit(sample)
        scored = await asyncio.gather(*pending)
    except BaseException:
        for task in pending:
            task.cancel()
        raise
    done = time.perf_counter()
    by_request: dict[str, list[ScoredSample]] = {r.request_id: [] for r in requests}
    for s, _ in scored:
        by_request[s.sample.request_id].append(s)
    missing = [
        rid
        for rid, samples in by_request.items()
        if len(samples) != next(r.sampling.n for r in requests if r.request_id == rid)
    ]
    if missing:
        raise RuntimeError(f"the rollout engine returned the wrong number of samples for {missing[:3]}")
    groups = [
        Group(r.request_id, r.problem_id, sorted(by_request[r.request_id], key=lambda s: s.sample.index))
        for r in requests
    ]
    last_verdict = max((t for _, t in scored), default=done)
    return RolloutResult(
        groups=groups,
        generate_s=generated - start,
        evaluate_s=last_verdict - (first_submit or last_verdict),
        wait_for_rewards_s=done - generated,
        completion_tokens=sum(len(s.sample.completion_ids) for s, _ in scored),
        gate_wait_s=max((s.sample.usage.get("gpu_gate_wait_s", 0.0) for s, _ in scored), default=0.0),
    )
