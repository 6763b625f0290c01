"""The benchmark in tools mode (`rollout.tools=[...]`): every sample is one multi-turn, tool-augmented trajectory
run by the training loop's own rl.rollout.trajectory.TrajectoryRunner (same tools, limits, tool formats, reward
modes and Trajectory records); its final answer is the sample's single attempt, which the benchmark's metrics
(correct@1, pass@k, fast_p, ...) score, as Makora's "single attempt" with tools does.

    results, trajectories, stats = await run_trajectory_benchmark(problems, engine, first_messages, backend,
                                                                  config, settings, solutions=index, store=store)
    report["trajectories"] = trajectory_report(trajectories, problems)

Leakage: `solutions` is rl.rollout.tool_rollouts.kernel_search_index(store, problems), the rule training applies
to its validation split: every benchmarked problem is held out of kernel_search (by id and source hash), and so
is every solution found on the validation or benchmark split. Correct answers found here join the store as split
"benchmark", which no later training or benchmark search returns.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Iterable

from envs.problems import Problem
from envs.verdict import Verdict
from rewards.kernel_reward import DEFAULT_DELTA, reward_for_verdict
from rewards.shaping import RewardConfig
from rl.bench.metrics import AttemptRecord, ProblemResult
from rl.bench.runner import RunSettings, RunStats
from rl.rollout.trajectory import TrajectoryConfig, TrajectoryRunner
from rl.rollout.trajectory_metrics import first_verdict, trajectory_metrics, turn_verdicts
from rl.rollout.trajectory_record import Trajectory
from rl.types import Message, RolloutRequest

__all__ = ["run_trajectory_benchmark", "trajectory_report", "trajectory_summary"]

PRIORITY = "validation"  # the pool's highest priority: a benchmark has no training to yield to


def _record(t: Trajectory) -> AttemptRecord:
    """The trajectory as its sample's single attempt: the final answer's verdict, tokens and cost over all turns."""
    usages = [turn.usage or {} for turn in t.turns]
    costs = [u["cost_usd"] for u in usages if u.get("cost_usd") is not None]
    return AttemptRecord(
        sample=t.index,
        attempt=0,
        verdict=t.final_verdict,
        prompt_tokens=sum(int(u.get("prompt_tokens") or len(turn.prompt_ids)) for u, turn in zip(usages, t.turns)),
        completion_tokens=sum(
            int(u.get("completion_tokens") or len(turn.completion_ids)) for u, turn in zip(usages, t.turns)
        ),
        cost_usd=sum(costs) if costs else None,
        generate_seconds=sum(turn.seconds for turn in t.turns),
        finish_reason=t.stop_reason,
        text=t.final_answer,
    )


async def run_trajectory_benchmark(
    problems: Iterable[Problem],
    engine: Any,
    first_messages: Callable[[Problem], list[Message]],
    backend: Any,
    config: TrajectoryConfig,
    settings: RunSettings,
    *,
    solutions: Any,
    store: Any = None,
    reward: RewardConfig | None = None,
    sizes: dict[str, dict] | None = None,
) -> tuple[list[ProblemResult], list[Trajectory], RunStats]:
    """`settings.samples` trajectories per problem, all turns batched through `engine`; `backend` serves
    kernel_evaluator, profile and the final answers (evaluate_async: envs.Evaluator or the Ray
    pool). Results in problem order, one AttemptRecord per trajectory."""
    problems = list(problems)
    by_id = {p.id: p for p in problems}
    if len(by_id) != len(problems):
        raise ValueError("the benchmark's problem list holds a problem id twice")
    if settings.attempts != 1:
        raise ValueError("a tools benchmark runs one trajectory per sample: its turns are the refinement")
    requests = [
        RolloutRequest(
            f"{p.id}/a0", p.id, first_messages(p), dataclasses.replace(settings.sampling, n=settings.samples)
        )
        for p in problems
    ]
    runner = TrajectoryRunner(
        engine,
        backend,
        config,
        reward=reward,
        solutions=solutions,
        profiler=backend if hasattr(backend, "profile") else None,
        store=store,
        store_split="benchmark",
    )
    trajectories = await runner.run(requests, by_id, priority=PRIORITY)
    timings = runner.timings
    stats = RunStats(
        generate_seconds=timings["generate_s"],
        evaluate_seconds=timings["tools_s"] + timings["final_evaluation_s"],
        rounds=max((len(t.turns) for t in trajectories), default=0),
    )
    records: dict[str, list[AttemptRecord]] = {p.id: [] for p in problems}
    for t in sorted(trajectories, key=lambda t: (t.problem_id, t.index)):
        records[t.problem_id].append(_record(t))
    sizes = sizes or {}
    results = [ProblemResult(p.id, p.level, tuple(records[p.id]), sizes.get(p.id)) for p in problems]
    return results, trajectories, stats


def _judged(t: Trajectory) -> list[tuple[str, int | None, Verdict]]:
    """Every answer the trajectory had judged, in order: (source, turn, verdict); the final answer last."""
    out: list[tuple[str, int | None, Verdict]] = []
    for turn in t.turns:
        out += [("kernel_evaluator", turn.index, c.verdict) for c in turn.tool_calls if c.verdict is not None]
        if turn.verdict is not None:
            out.append(("turn_answer", turn.index, turn.verdict))
    if t.final_verdict is not None:
        out.append(("final", len(t.turns) - 1 if t.turns else None, t.final_verdict))
    return out


def _verdict(v: Verdict | None, delta: float) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "status": v.status.value,
        "correct": v.correct,
        "speedup": v.speedup,
        "reward": reward_for_verdict(v, delta),
        "hack": v.hack.category if v.hack else None,
    }


def trajectory_summary(t: Trajectory, delta: float = DEFAULT_DELTA) -> dict[str, Any]:
    """One trajectory of a benchmark's per-problem row: turns, tool calls, stop reason, the final answer against
    the best judged answer of the trajectory, the correct rate per turn and the reward gain first -> final."""
    judged = _judged(t)
    # best: correct first, then the highest speedup (unmeasured lowest), then reward; ties go to the final answer
    best = max(
        reversed(judged),
        key=lambda j: (
            j[2].correct,
            j[2].speedup if j[2].speedup is not None else -1.0,
            reward_for_verdict(j[2], delta),
        ),
        default=None,
    )
    first = first_verdict(t)
    final = t.final_verdict
    return {
        "trajectory_id": t.trajectory_id,
        "sample": t.index,
        "turns": len(t.turns),
        "tool_calls": len(t.tool_calls),
        "tools": dict(collections.Counter(c.name for c in t.tool_calls)),
        "failed_tool_calls": sum(not c.ok for c in t.tool_calls),
        "stop_reason": t.stop_reason,
        "correct_within_trajectory": any(v.correct for _, _, v in judged),
        "final": _verdict(final, delta),
        "best": None if best is None else {"source": best[0], "turn": best[1], **_verdict(best[2], delta)},
        "final_is_best": best is not None and best[0] == "final",
        "per_turn": [{"turn": i, "status": v.status.value, "correct": v.correct} for i, v in turn_verdicts(t)],
        "reward": t.reward,
        "reward_gain_first_to_final": (reward_for_verdict(final, delta) - reward_for_verdict(first, delta))
        if first is not None and final is not None
        else None,
        "completion_tokens": t.completion_tokens,
        "seconds": t.seconds,
    }


def trajectory_report(
    trajectories: list[Trajectory], problems: Iterable[Problem], delta: float = DEFAULT_DELTA
) -> dict[str, Any]:
    """benchmark.json's `trajectories`: the shares over problems (sample 0's trajectory, like correct@1), the
    training loop's trajectory metrics over every trajectory (rl.rollout.trajectory_metrics, without the
    prefix: turns_mean, tool/<name>/..., turn_<k>/correct_rate, reward_gain_first_to_final, stop/<reason>), and
    each problem's trajectories (trajectory_summary)."""
    by_problem: dict[str, list[Trajectory]] = collections.defaultdict(list)
    for t in trajectories:
        by_problem[t.problem_id].append(t)
    per_problem = {
        p.id: [trajectory_summary(t, delta) for t in sorted(by_problem[p.id], key=lambda t: t.index)] for p in problems
    }
    firsts = [rows[0] for rows in per_problem.values() if rows]

    def share(key: Callable[[dict[str, Any]], bool]) -> float | None:
        return sum(map(key, firsts)) / len(firsts) if firsts else None

    metrics = {k.split("/", 1)[1]: v for k, v in trajectory_metrics(trajectories, "bench", delta).items()}
    return {
        "correct_within_trajectory": share(lambda r: r["correct_within_trajectory"]),
        "final_correct": share(lambda r: bool(r["final"] and r["final"]["correct"])),
        "best_correct": share(lambda r: bool(r["best"] and r["best"]["correct"])),
        "metrics": metrics,
        "per_problem": per_problem,
    }
