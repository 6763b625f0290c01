"""Trajectories as the training loop's rollout result: the integration point of tools into rl.loop.

    result = await generate_trajectories_and_score(engine, requests, problems, pool, reward, config,
                                                   solutions=index)
    result.trajectories                 the Trajectory records (saved as JSONL by the loop)

`result` has the shape rl.scoring.generate_and_score returns (one Group per request), so the loop's
grouping, advantages and metrics apply unchanged. Each training row of a trajectory
(Trajectory.training_rows(config.layout)) becomes one ScoredSample whose Sample holds the row as prompt
(up to the first policy token) + completion (the rest: later policy turns AND the tool outputs between them),
with the per-token loss mask over the completion in `Sample.loss_mask` (1 = policy token), which
build_train_batch carries into TrainBatch.loss_masks and the learner applies (rl/learner/logprobs.pack_rows).
Masked positions hold logprob 0.0: a placeholder the learner never reads.
"""

from __future__ import annotations

from typing import Any, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from rewards.shaping import RewardConfig
from rl.rollout.trajectory import TrajectoryConfig, TrajectoryRunner
from rl.rollout.trajectory_record import TrainingRow, Trajectory
from rl.scoring import RolloutResult
from rl.types import Group, RolloutRequest, Sample, ScoredSample


def row_sample(t: Trajectory, row: TrainingRow, index: int) -> Sample:
    """One training row as a Sample: prompt = the tokens before the first policy token."""
    first = row.loss_mask.index(1)
    mask = row.loss_mask[first:]
    logprobs = [0.0 if p is None else float(p) for p in row.logprobs[first:]]
    has_logprobs = all(turn.logprobs is not None for turn in t.turns)
    return Sample(
        t.request_id,
        t.problem_id,
        index,
        row.input_ids[:first],
        row.input_ids[first:],
        t.final_answer,
        logprobs if has_logprobs else None,
        "stop",
        t.policy_version,
        t.seconds,
        {"trajectory_id": t.trajectory_id, "turn": row.turn, "turns": len(t.turns), "tool_calls": len(t.tool_calls)},
        loss_mask=mask,
    )


def trajectory_groups(requests: list[RolloutRequest], trajectories: list[Trajectory], layout: str) -> list[Group]:
    by_request: dict[str, list[ScoredSample]] = {r.request_id: [] for r in requests}
    for t in trajectories:
        for row in t.training_rows(layout):
            if 1 not in row.loss_mask:
                continue
            samples = by_request[t.request_id]
            samples.append(
                ScoredSample(row_sample(t, row, len(samples)), t.final_verdict, row.reward, {"trajectory": row.reward})
            )
    return [Group(r.request_id, r.problem_id, by_request[r.request_id]) for r in requests]


async def generate_trajectories_and_score(
    engine: Any,
    requests: list[RolloutRequest],
    problems: Mapping[str, Problem],
    pool: KernelEvaluator,
    reward: RewardConfig,
    config: TrajectoryConfig,
    priority: str = "train",
    **runner_kwargs: Any,
) -> RolloutResult:
    """Run the trajectories of `requests` and turn them into the loop's groups. Stage times: generate_s is
    the wall time of the turns' generation calls, evaluate_s that of the tool calls plus the final answers'
    evaluation, wait_for_rewards_s the final evaluation alone (tools and final answers are judged by the
    same pool)."""
    runner = TrajectoryRunner(engine, pool, config, reward=reward, **runner_kwargs)
    trajectories = await runner.run(requests, problems, priority)
    t = runner.timings
    return RolloutResult(
        groups=trajectory_groups(requests, trajectories, config.layout),
        generate_s=t["generate_s"],
        evaluate_s=t["tools_s"] + t["final_evaluation_s"],
        wait_for_rewards_s=t["final_evaluation_s"],
        completion_tokens=sum(tr.completion_tokens for tr in trajectories),
        trajectories=trajectories,
    )
