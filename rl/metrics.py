"""Per-step numbers of a run, computed from typed records (no I/O here: rl.tracking writes them).

    rollout_metrics(groups, "train", max_tokens)   reward, correctness, status mix, speedups, lengths
    learner_metrics(learner_out)                   the learner's train_step dict under train/...
    stage_metrics(seconds)                         seconds per stage under time/...

Key names (flat, W&B-style `<section>/<name>`; the reward mean's key ends in `mean`):
  <split>/reward_mean|std|max, <split>/kernel_reward_mean (+ one mean per other reward part),
  <split>/correct_rate, <split>/status/<status> (share of samples), <split>/hack/<category>,
  <split>/speedup_geomean|median (over correct samples with a measured speedup; NaN when none),
  <split>/fast_1 (share correct and faster than the baseline), <split>/zero_variance_group_frac,
  <split>/response_len_mean|max, <split>/truncation_rate, <split>/samples, <split>/groups.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping

from envs.verdict import Status
from rl.types import Group, ScoredSample

__all__ = ["LEARNER_KEYS", "STAGES", "learner_metrics", "rollout_metrics", "stage_metrics", "sample_rows"]

# What the issue asks every step to show from the learner (rl.learner's train_step names them so).
# pg_loss: the policy loss; kl_old / kl_ref: to the sampling policy and the frozen reference; ratio_*: the
# PPO ratio to the old policy; rollout_logprob_diff_* and tis_*: engine-vs-trainer logprobs and the truncated
# importance weights built from them (docs/algorithms.md).
LEARNER_KEYS = ("loss", "pg_loss", "clip_frac_low", "clip_frac_high", "kl_old", "kl_ref", "entropy", "grad_norm",
                "lr", "rollout_logprob_diff_mean", "rollout_logprob_diff_max", "tis_ratio_mean", "tis_ratio_max",
                "tis_ratio_min", "tis_clip_frac", "ratio_mean", "ratio_max", "ratio_min", "tokens_per_s")
STAGES = ("generate", "evaluate", "wait_for_rewards", "train", "sync", "step")


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def rollout_metrics(groups: Iterable[Group], split: str, max_tokens: int) -> dict[str, float]:
    groups = list(groups)
    samples: list[ScoredSample] = [s for g in groups for s in g.samples]
    n = len(samples)
    out: dict[str, float] = {f"{split}/samples": n, f"{split}/groups": len(groups)}
    if not n:
        return out
    rewards = [s.reward for s in samples]
    out[f"{split}/reward_mean"] = _mean(rewards)
    out[f"{split}/reward_std"] = statistics.pstdev(rewards)
    out[f"{split}/reward_max"] = max(rewards)
    for part in sorted({k for s in samples for k in s.reward_parts}):
        out[f"{split}/{part}_mean"] = _mean([s.reward_parts.get(part, 0.0) for s in samples])
    correct = [s for s in samples if s.verdict.status is Status.CORRECT]
    out[f"{split}/correct_rate"] = len(correct) / n
    for status in Status:
        out[f"{split}/status/{status.value}"] = sum(s.verdict.status is status for s in samples) / n
    for category in sorted({s.verdict.hack.category for s in samples if s.verdict.hack}):
        out[f"{split}/hack/{category}"] = sum(bool(s.verdict.hack and s.verdict.hack.category == category)
                                              for s in samples) / n
    speedups = [s.verdict.speedup for s in correct if s.verdict.speedup is not None and s.verdict.speedup > 0]
    out[f"{split}/speedup_geomean"] = math.exp(_mean([math.log(x) for x in speedups])) if speedups else math.nan
    out[f"{split}/speedup_median"] = statistics.median(speedups) if speedups else math.nan
    out[f"{split}/fast_1"] = sum(1 for s in correct if (s.verdict.speedup or 0.0) > 1.0) / n
    if groups:
        out[f"{split}/zero_variance_group_frac"] = _mean([float(len(set(g.rewards)) <= 1) for g in groups])
    lengths = [len(s.sample.completion_ids) for s in samples]
    out[f"{split}/response_len_mean"] = _mean(lengths)
    out[f"{split}/response_len_max"] = max(lengths)
    out[f"{split}/truncation_rate"] = sum(s.sample.finish_reason == "length" or len(s.sample.completion_ids)
                                          >= max_tokens for s in samples) / n
    return out


def learner_metrics(learner_out: Mapping[str, Any]) -> dict[str, float]:
    """The learner's numbers under `train/`; every LEARNER_KEYS key present (NaN when the learner has none,
    e.g. kl_ref without a reference model), so curves and tables always have the same columns."""
    out = {f"train/{k}": float(v) for k, v in learner_out.items() if isinstance(v, (int, float))}
    for key in LEARNER_KEYS:
        out.setdefault(f"train/{key}", math.nan)
    return out


def stage_metrics(seconds: Mapping[str, float]) -> dict[str, float]:
    """Seconds per stage under time/, and each stage's share of the step under time_share/ (stages overlap
    with one_step_off and with evaluation during generation, so shares need not sum to 1)."""
    out = {f"time/{k}": float(v) for k, v in seconds.items()}
    step = seconds.get("step")
    if step:
        out.update({f"time_share/{k}": float(v) / step for k, v in seconds.items() if k != "step"})
    return out


def sample_rows(groups: Iterable[Group], step: int, limit: int | None = None,
                split: str = "train") -> list[dict[str, Any]]:
    """One row per sample (the first `limit`) with its verdict: the W&B table and samples.jsonl."""
    rows: list[dict[str, Any]] = []
    for g in groups:
        for s in g.samples:
            if limit is not None and len(rows) >= limit:
                return rows
            v = s.verdict
            rows.append({"step": step, "split": split, "problem_id": g.problem_id, "index": s.sample.index,
                         "status": v.status.value, "hack": v.hack.category if v.hack else "",
                         "speedup": v.speedup if v.speedup is not None else math.nan, "reward": s.reward,
                         "tokens": len(s.sample.completion_ids), "finish": s.sample.finish_reason,
                         "error": (v.error or "")[:500], "completion": s.sample.text})
    return rows
