"""Per-step numbers of a run, computed from typed records (no I/O here: rl.tracking writes them).

    rollout_metrics(groups, "train", max_tokens)   reward, correctness, status mix, speedups, lengths
    learner_metrics(learner_out)                   the learner's train_step dict under train/...
    batch_metrics(batch, advantage)                the train batch's advantages under train/advantage_*
    stage_metrics(seconds)                         seconds per stage under time/...
    pool_metrics(pool.metrics(), "summary")        the evaluation pool's few per-step keys (or all: "full")
    verl_aliases(row)                              verl's names for the row's keys (VERL_ALIASES)

Key names (flat, W&B-style `<section>/<name>`; the reward mean's key ends in `mean`):
  <split>/reward_mean|std|max, <split>/kernel_reward_mean (+ one mean per other reward part),
  <split>/correct_rate, <split>/correct_rate_low|high (its 95% Wilson interval over the samples),
  <split>/problem/<problem_id>/correct_rate (per problem), <split>/status/<status> (share of samples),
  <split>/hack/<category>,
  <split>/speedup_geomean|median (over correct samples with a measured speedup; NaN when none),
  <split>/fast_1 (share correct and faster than the baseline), <split>/zero_variance_group_frac,
  <split>/response_len_mean|max|min, <split>/prompt_len_mean|max|min, <split>/truncation_rate,
  <split>/samples, <split>/groups,
  <split>/eval_s/<phase>|exclusive, <split>/eval_gib/<phase>, <split>/evaluations (what the evaluations behind
  the samples cost: evaluation_costs).
These are the primary keys; verl-style names (actor/*, critic/*, response_length/*, timing_s/*, perf/*) are
logged beside them with the same values, from the one table VERL_ALIASES (docs/training.md, Metrics).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping

from envs.verdict import Status, Verdict
from rl.types import Group, ScoredSample, TrainBatch

__all__ = [
    "LEARNER_KEYS",
    "POOL_SUMMARY_KEYS",
    "STAGES",
    "VERL_ALIASES",
    "batch_metrics",
    "learner_metrics",
    "pool_metrics",
    "rollout_metrics",
    "sample_rows",
    "stage_metrics",
    "throughput_metrics",
    "verl_aliases",
    "wilson_interval",
]

# What the issue asks every step to show from the learner (rl.learner's train_step names them so).
# pg_loss: the policy loss; kl_old / kl_ref: to the sampling policy and the frozen reference; ratio_*: the
# PPO ratio to the old policy; rollout_logprob_diff_* and tis_*: engine-vs-trainer logprobs and the truncated
# importance weights built from them (docs/algorithms.md).
LEARNER_KEYS = (
    "loss",
    "pg_loss",
    "clip_frac_low",
    "clip_frac_high",
    "kl_old",
    "kl_ref",
    "entropy",
    "grad_norm",
    "lr",
    "rollout_logprob_diff_mean",
    "rollout_logprob_diff_max",
    "tis_ratio_mean",
    "tis_ratio_max",
    "tis_ratio_min",
    "tis_clip_frac",
    "ratio_mean",
    "ratio_max",
    "ratio_min",
    "tokens_per_s",
)
STAGES = ("generate", "evaluate", "wait_for_rewards", "train", "sync", "step")

# verl's metric names (volcengine/verl: trainer/ppo/metric_utils.py, its actor workers and the PPO trainer's
# timers) -> the key of ours with the same meaning. verl_aliases() logs each verl key beside ours with the
# value of ours: a verl dashboard finds its keys, and plots of our keys keep working. This table is the one
# place the verl names live; a verl key whose source is absent from a row is left out of that row.
# Where the meanings differ in a detail, the comment says how; verl keys with no honest counterpart here
# (actor/ppo_kl: verl's k1 estimate, ours is k3; actor/pg_clipfrac_lower: dual-clip, which we do not have;
# critic/values|returns: PPO's batch values before the update) are not aliased.
VERL_ALIASES: tuple[tuple[str, str], ...] = (
    ("actor/pg_loss", "train/pg_loss"),
    ("actor/entropy", "train/entropy"),
    ("actor/kl_loss", "train/kl_loss"),  # only with algorithm.kl_coef > 0, as verl's only with use_kl_loss
    ("actor/grad_norm", "train/grad_norm"),
    ("actor/lr", "train/lr"),
    ("actor/pg_clipfrac", "train/clip_frac"),  # tokens whose gradient the clip removed, both sides
    # The reward function's output over every sample generated this step: verl's score; its rewards differ
    # from the score only by a KL penalty in the reward, which KernelRL does not have (KL is a loss term).
    ("critic/score/mean", "train/reward_mean"),
    ("critic/score/max", "train/reward_max"),
    ("critic/score/min", "train/reward_min"),
    ("critic/rewards/mean", "train/reward_mean"),
    ("critic/rewards/max", "train/reward_max"),
    ("critic/rewards/min", "train/reward_min"),
    ("critic/advantages/mean", "train/advantage_mean"),  # token-weighted over the train batch, as verl's
    ("critic/advantages/max", "train/advantage_max"),
    ("critic/advantages/min", "train/advantage_min"),
    ("response_length/mean", "train/response_len_mean"),
    ("response_length/max", "train/response_len_max"),
    ("response_length/min", "train/response_len_min"),
    ("response_length/clip_ratio", "train/truncation_rate"),  # stopped by rollout.max_tokens
    ("prompt_length/mean", "train/prompt_len_mean"),
    ("prompt_length/max", "train/prompt_len_max"),
    ("prompt_length/min", "train/prompt_len_min"),
    ("timing_s/gen", "time/generate"),
    # evaluation runs while the engine generates; what the step waits for after generation is the reward stage
    ("timing_s/reward", "time/wait_for_rewards"),
    ("timing_s/update_actor", "time/train"),
    ("timing_s/update_weights", "time/sync"),
    ("timing_s/testing", "time/validate"),
    ("timing_s/step", "time/step"),
    ("perf/time_per_step", "time/step"),
    ("perf/total_num_tokens", "train/tokens"),  # prompt + completion tokens the learner trained on
    ("perf/throughput", "perf/step_tokens_per_s_per_gpu"),  # only where nvidia-smi counts GPUs
    ("perf/max_memory_allocated_gb", "train/max_memory_allocated_gb"),  # the learner's (rank 0), CUDA only
    ("perf/max_memory_reserved_gb", "train/max_memory_reserved_gb"),
)

# The pool's keys a step logs by default (wandb.pool_metrics=summary), plus its pool/verdict_frac/<status>
# shares; wandb.pool_metrics=full logs every key of the pool's metrics() (per-actor busy fractions, every
# counter, p99s and means of each stage). Counters are cumulative over the run.
POOL_SUMMARY_KEYS = (
    "pool/queue_depth",
    "pool/in_flight",
    "pool/cache_hit_rate",
    "pool/latency/total_p50_s",
    "pool/latency/total_p90_s",
    "pool/latency/execution_p50_s",
    "pool/latency/execution_p90_s",
    "pool/actors_alive",
    "pool/actor_failures",
    "pool/actor_restarts",
    "pool/retries",
    "pool/crashes_after_retry",
    "pool/oom_retries",  # the GPU was full of other processes: evaluations run again (envs/worker/oom.py)
    "pool/gpu_concurrency_cuts",  # ... and fewer run at once (envs/worker/gpu_concurrency.py)
    "pool/gpu_busy_fraction",
)
POOL_SUMMARY_PREFIXES = ("pool/verdict_frac/",)


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
    out[f"{split}/reward_min"] = min(rewards)
    for part in sorted({k for s in samples for k in s.reward_parts}):
        out[f"{split}/{part}_mean"] = _mean([s.reward_parts.get(part, 0.0) for s in samples])
    correct = [s for s in samples if s.verdict.status is Status.CORRECT]
    out[f"{split}/correct_rate"] = len(correct) / n
    out[f"{split}/correct_rate_low"], out[f"{split}/correct_rate_high"] = wilson_interval(len(correct), n)
    for problem_id in sorted({g.problem_id for g in groups}):
        mine = [s for g in groups if g.problem_id == problem_id for s in g.samples]
        if mine:
            out[f"{split}/problem/{problem_id}/correct_rate"] = sum(
                s.verdict.status is Status.CORRECT for s in mine
            ) / len(mine)
    for status in Status:
        out[f"{split}/status/{status.value}"] = sum(s.verdict.status is status for s in samples) / n
    for category in sorted({s.verdict.hack.category for s in samples if s.verdict.hack}):
        out[f"{split}/hack/{category}"] = (
            sum(bool(s.verdict.hack and s.verdict.hack.category == category) for s in samples) / n
        )
    speedups = [s.verdict.speedup for s in correct if s.verdict.speedup is not None and s.verdict.speedup > 0]
    out[f"{split}/speedup_geomean"] = math.exp(_mean([math.log(x) for x in speedups])) if speedups else math.nan
    out[f"{split}/speedup_median"] = statistics.median(speedups) if speedups else math.nan
    out[f"{split}/fast_1"] = sum(1 for s in correct if (s.verdict.speedup or 0.0) > 1.0) / n
    if groups:
        out[f"{split}/zero_variance_group_frac"] = _mean([float(len(set(g.rewards)) <= 1) for g in groups])
    out.update(evaluation_costs(samples, split))
    lengths = [len(s.sample.completion_ids) for s in samples]
    out[f"{split}/response_len_mean"] = _mean(lengths)
    out[f"{split}/response_len_max"] = max(lengths)
    out[f"{split}/response_len_min"] = min(lengths)
    prompts = [len(s.sample.prompt_ids) for s in samples]
    out[f"{split}/prompt_len_mean"] = _mean(prompts)
    out[f"{split}/prompt_len_max"] = max(prompts)
    out[f"{split}/prompt_len_min"] = min(prompts)
    out[f"{split}/truncation_rate"] = (
        sum(s.sample.finish_reason == "length" or len(s.sample.completion_ids) >= max_tokens for s in samples) / n
    )
    return out


def evaluation_costs(samples: Iterable[ScoredSample], split: str) -> dict[str, float]:
    """What the evaluations behind `samples` cost, over the distinct evaluations that ran (cache hits left out, a
    deduplicated candidate's copies counted once): `{split}/evaluations`, how many; `{split}/eval_s/<phase>`, each
    top-level phase of `Verdict.phase_seconds` summed; `{split}/eval_s/exclusive`, the seconds they held a GPU
    exclusively (its timed windows, which one GPU runs one at a time: the least a GPU-bound wait for rewards can
    be); `{split}/eval_gib/<phase>`, the most GPU memory a worker reserved during that phase (and
    `<phase>.allocated`, the most its tensors held; `<phase>.<step>` the same for a step inside it)."""
    distinct: dict[tuple, Verdict] = {}
    for s in samples:
        v = s.verdict
        if not v.cached and v.phase_seconds:  # copies of one deduplicated job share its phases, bit for bit
            distinct[(v.problem_id, tuple(sorted(v.phase_seconds.items())))] = v
    out: dict[str, float] = {f"{split}/evaluations": len(distinct)}
    for v in distinct.values():
        for phase, seconds in v.phase_seconds.items():
            if "." not in phase:  # a phase's steps (`timing.timed_runs`) are inside it
                out[f"{split}/eval_s/{phase}"] = out.get(f"{split}/eval_s/{phase}", 0.0) + seconds
        for phase, gib in v.phase_memory_gib.items():
            out[f"{split}/eval_gib/{phase}"] = max(out.get(f"{split}/eval_gib/{phase}", 0.0), gib)
    out[f"{split}/eval_s/exclusive"] = sum(v.exclusive_seconds for v in distinct.values())
    return out


def learner_metrics(learner_out: Mapping[str, Any]) -> dict[str, float]:
    """The learner's numbers under `train/`; every LEARNER_KEYS key present (NaN when the learner has none,
    e.g. kl_ref without a reference model), so curves and tables always have the same columns."""
    out = {f"train/{k}": float(v) for k, v in learner_out.items() if isinstance(v, (int, float))}
    for key in LEARNER_KEYS:
        out.setdefault(f"train/{key}", math.nan)
    out["train/clip_frac"] = out["train/clip_frac_low"] + out["train/clip_frac_high"]  # disjoint: A<0 / A>0
    return out


def batch_metrics(batch: TrainBatch, advantage: str) -> dict[str, float]:
    """The train batch's advantages: mean over its loss tokens (each row's advantage once per token the loss
    is taken on, as verl's critic/advantages/mean), max and min over rows. Nothing for advantage=gae: that
    batch carries rewards, and the learner's value head makes the advantages (train/advantages_mean)."""
    if advantage == "gae" or not batch.advantages:
        return {}
    tokens = [
        (len(ids) - plen) if batch.loss_masks is None or batch.loss_masks[r] is None else sum(batch.loss_masks[r])
        for r, (ids, plen) in enumerate(zip(batch.input_ids, batch.prompt_lengths))
    ]
    weight = sum(tokens)
    mean = (sum(a * n for a, n in zip(batch.advantages, tokens)) / weight) if weight else _mean(batch.advantages)
    return {
        "train/advantage_mean": mean,
        "train/advantage_max": max(batch.advantages),
        "train/advantage_min": min(batch.advantages),
    }


def throughput_metrics(tokens: float, step_s: float, gpus: float | None) -> dict[str, float]:
    """Trained tokens (prompt + completion) per second of the whole step, and per GPU where the GPUs are
    counted (verl's perf/throughput); nothing for a step of no seconds."""
    if step_s <= 0:
        return {}
    out = {"perf/step_tokens_per_s": tokens / step_s}
    if gpus:
        out["perf/step_tokens_per_s_per_gpu"] = tokens / step_s / gpus
    return out


def pool_metrics(pool: Mapping[str, Any], mode: str = "summary") -> dict[str, Any]:
    """The pool's metrics() as logged: POOL_SUMMARY_KEYS and the verdict shares, or every key (mode full)."""
    if mode == "full":
        return dict(pool)
    if mode != "summary":
        raise ValueError(f"pool metrics mode must be summary or full, not {mode!r}")
    return {k: v for k, v in pool.items() if k in POOL_SUMMARY_KEYS or k.startswith(POOL_SUMMARY_PREFIXES)}


def verl_aliases(row: Mapping[str, Any]) -> dict[str, Any]:
    """verl's key for every key of `row` that VERL_ALIASES names, with its value (row.update() the result)."""
    return {verl: row[ours] for verl, ours in VERL_ALIASES if ours in row}


def stage_metrics(seconds: Mapping[str, float]) -> dict[str, float]:
    """Seconds per stage under time/, and each stage's share of the step under time_share/ (stages overlap
    with one_step_off and with evaluation during generation, so shares need not sum to 1)."""
    out = {f"time/{k}": float(v) for k, v in seconds.items()}
    step = seconds.get("step")
    if step:
        out.update({f"time_share/{k}": float(v) / step for k, v in seconds.items() if k != "step"})
    return out


def sample_rows(
    groups: Iterable[Group], step: int, limit: int | None = None, split: str = "train"
) -> list[dict[str, Any]]:
    """One row per sample (the first `limit`) with its verdict: the W&B table and samples.jsonl."""
    rows: list[dict[str, Any]] = []
    for g in groups:
        for s in g.samples:
            if limit is not None and len(rows) >= limit:
                return rows
            v = s.verdict
            rows.append(
                {
                    "step": step,
                    "split": split,
                    "problem_id": g.problem_id,
                    "index": s.sample.index,
                    "status": v.status.value,
                    "hack": v.hack.category if v.hack else "",
                    "speedup": v.speedup if v.speedup is not None else math.nan,
                    "reward": s.reward,
                    "tokens": len(s.sample.completion_ids),
                    "finish": s.sample.finish_reason,
                    "error": (v.error or "")[:500],
                    "completion": s.sample.text,
                }
            )
    return rows


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate `successes / n` (95% at z = 1.96); (nan, nan) when n is 0.

    Over the samples of a validation this is the interval of the expected correct rate on those held-out
    problems at that sampling: the attempt-to-attempt noise. Samples of one problem are not exchangeable with
    another's, and with differing per-problem rates the binomial variance is an upper bound of that noise, so
    the interval is conservative for these problems; it says nothing about other problems."""
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got {successes} of {n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
