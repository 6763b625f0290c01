"""Metrics of a batch of trajectories (flat `<prefix>/<name>` keys, like rl.metrics), and W&B table rows.

turns_mean, tool_calls_mean; per tool: calls per trajectory, failure rate, mean latency; correct rate of the
answers proposed at each turn (turn_k/correct_rate, over trajectories that proposed one at turn k); the final
answer's correct rate; reward gain from the first proposed answer to the final one; stop reasons.
"""

from __future__ import annotations

import collections
from typing import Any, Sequence

from envs.verdict import Verdict
from rewards.kernel_reward import DEFAULT_DELTA, reward_for_verdict
from rl.rollout.trajectory_record import Trajectory


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def first_verdict(t: Trajectory):
    """The verdict of the first answer the trajectory had judged: a kernel_evaluator call, or a turn's answer."""
    for turn in t.turns:
        for call in turn.tool_calls:
            if call.verdict is not None:
                return call.verdict
        if turn.verdict is not None:
            return turn.verdict
    return None


def turn_verdicts(t: Trajectory) -> list[tuple[int, Verdict]]:
    """(turn index, verdict) of each turn that had an answer judged: the turn's own answer when the reward mode
    scored it, else its last kernel_evaluator call (reward_mode=final scores only the final answer)."""
    out = []
    for turn in t.turns:
        judged = [c.verdict for c in turn.tool_calls if c.verdict is not None]
        verdict = turn.verdict or (judged[-1] if judged else None)
        if verdict is not None:
            out.append((turn.index, verdict))
    return out


def trajectory_metrics(
    trajectories: Sequence[Trajectory], prefix: str = "train", delta: float = DEFAULT_DELTA
) -> dict[str, float]:
    if not trajectories:
        return {}
    n = len(trajectories)
    m: dict[str, float] = {
        f"{prefix}/turns_mean": _mean([len(t.turns) for t in trajectories]),
        f"{prefix}/tool_calls_mean": _mean([len(t.tool_calls) for t in trajectories]),
        f"{prefix}/final_correct_rate": _mean(
            [1.0 if t.final_verdict and t.final_verdict.correct else 0.0 for t in trajectories]
        ),
        f"{prefix}/trajectory_reward_mean": _mean([t.reward for t in trajectories]),
        f"{prefix}/trajectory_tokens_mean": _mean([t.completion_tokens for t in trajectories]),
    }
    calls = collections.defaultdict(list)
    for t in trajectories:
        for c in t.tool_calls:
            calls[c.name].append(c)
    for name, records in sorted(calls.items()):
        m[f"{prefix}/tool/{name}/calls_per_trajectory"] = len(records) / n
        m[f"{prefix}/tool/{name}/failure_rate"] = _mean([0.0 if c.ok else 1.0 for c in records])
        m[f"{prefix}/tool/{name}/latency_mean_s"] = _mean([c.seconds for c in records])
    per_turn = collections.defaultdict(list)
    for t in trajectories:
        for index, verdict in turn_verdicts(t):
            per_turn[index].append(1.0 if verdict.correct else 0.0)
    for k, values in sorted(per_turn.items()):
        m[f"{prefix}/turn_{k}/correct_rate"] = _mean(values)
    gains = []
    for t in trajectories:
        first = first_verdict(t)
        if first is not None and t.final_verdict is not None:
            gains.append(reward_for_verdict(t.final_verdict, delta) - reward_for_verdict(first, delta))
    if gains:
        m[f"{prefix}/reward_gain_first_to_final"] = _mean(gains)
    for reason, count in collections.Counter(t.stop_reason for t in trajectories).items():
        m[f"{prefix}/stop/{reason}"] = count / n
    return m


def trajectory_rows(trajectories: Sequence[Trajectory], step: int, limit: int | None = None) -> list[dict[str, Any]]:
    """One row per trajectory for a W&B table or samples.jsonl: the conversation as text, the outcome."""
    rows = []
    for t in trajectories[:limit]:
        v = t.final_verdict
        rows.append(
            {
                "step": step,
                "trajectory_id": t.trajectory_id,
                "problem_id": t.problem_id,
                "turns": len(t.turns),
                "tool_calls": ",".join(c.name for c in t.tool_calls),
                "stop_reason": t.stop_reason,
                "status": v.status.value if v else None,
                "speedup": v.speedup if v else None,
                "reward": t.reward,
                "conversation": "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in t.messages[1:]),
            }
        )
    return rows
