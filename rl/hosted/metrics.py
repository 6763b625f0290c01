"""Rows for metrics.jsonl / W&B from a hosted job: our verdicts (the open loop's keys) and OpenAI's numbers.

    verdict_metrics(graded, "train")   train/reward_mean|std|max, correct_rate, status/<s>, hack/<category>,
                                       speedup_geomean|median, fast_1, samples: as rl.metrics.rollout_metrics
                                       computes them, from the verdicts the service returned since the last row
    event_metrics(events)              (step, {"openai/<key>": value}): every number of the job's `metrics`
                                       events (their `data`), flattened; the step is the events' `step`
    checkpoint_metrics(checkpoint)     openai/checkpoint/<metric> of one fine_tuning.job.checkpoint

Which grading requests were validation is known from the problem id (the split is ours), so samples of
held-out problems go under val/.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping

from envs.verdict import Status
from rl.hosted.service import GradedSample

__all__ = ["checkpoint_metrics", "event_metrics", "split_graded", "verdict_metrics"]


def verdict_metrics(graded: Iterable[GradedSample], split: str) -> dict[str, float]:
    graded = list(graded)
    n = len(graded)
    out: dict[str, float] = {f"{split}/samples": n}
    if not n:
        return out
    verdicts = [g.verdict for g in graded]
    rewards = [g.reward for g in graded]
    out[f"{split}/reward_mean"] = sum(rewards) / n
    out[f"{split}/reward_std"] = statistics.pstdev(rewards)
    out[f"{split}/reward_max"] = max(rewards)
    correct = [v for v in verdicts if v.status is Status.CORRECT]
    out[f"{split}/correct_rate"] = len(correct) / n
    for status in Status:
        out[f"{split}/status/{status.value}"] = sum(v.status is status for v in verdicts) / n
    for category in sorted({v.hack.category for v in verdicts if v.hack}):
        out[f"{split}/hack/{category}"] = sum(bool(v.hack and v.hack.category == category) for v in verdicts) / n
    speedups = [v.speedup for v in correct if v.speedup is not None and v.speedup > 0]
    out[f"{split}/speedup_geomean"] = (
        math.exp(sum(math.log(x) for x in speedups) / len(speedups)) if speedups else math.nan
    )
    out[f"{split}/speedup_median"] = statistics.median(speedups) if speedups else math.nan
    out[f"{split}/fast_1"] = sum(1 for v in correct if (v.speedup or 0.0) > 1.0) / n
    return out


def split_graded(graded: Iterable[GradedSample], validation_ids: Iterable[str]) -> dict[str, list[GradedSample]]:
    held_out = set(validation_ids)
    out: dict[str, list[GradedSample]] = {"train": [], "val": []}
    for g in graded:
        out["val" if g.problem_id in held_out else "train"].append(g)
    return out


def _flatten(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, (int, float)):
        out[prefix] = float(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}/{k}", v, out)


def event_metrics(events: Iterable[Any]) -> tuple[int | None, dict[str, float]]:
    """The numbers of `metrics` events (oldest first: a later value of a key wins) and their largest step."""
    out: dict[str, float] = {}
    step: int | None = None
    for event in events:
        if getattr(event, "type", None) != "metrics" or not isinstance(getattr(event, "data", None), Mapping):
            continue
        data = dict(event.data)
        if isinstance(data.get("step"), (int, float)):
            step = max(step or 0, int(data.pop("step")))
        for key, value in data.items():
            _flatten(f"openai/{key}", value, out)
    return step, out


def checkpoint_metrics(checkpoint: Any) -> dict[str, float]:
    metrics = getattr(checkpoint, "metrics", None)
    values = metrics.model_dump() if hasattr(metrics, "model_dump") else dict(metrics or {})
    out: dict[str, float] = {}
    for key, value in values.items():
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"openai/checkpoint/{key}"] = float(value)
    return out
