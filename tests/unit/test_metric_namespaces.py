"""rl.metrics' verl-style names (VERL_ALIASES), the train batch's advantages, prompt lengths, throughput and
the evaluation pool's per-step summary, on hand-built records (issue 35, the metrics part)."""

import math

import pytest

from envs.pool.metrics import PoolMetrics
from envs.verdict import Status, Verdict
from rl.learner.advantages import build_train_batch
from rl.learner.config import AlgorithmConfig
from rl.metrics import (
    POOL_SUMMARY_KEYS,
    VERL_ALIASES,
    batch_metrics,
    learner_metrics,
    pool_metrics,
    rollout_metrics,
    stage_metrics,
    throughput_metrics,
    verl_aliases,
)
from rl.types import Group, Sample, ScoredSample, TrainBatch

# What a verl user plots (issue 35): each must be logged under this exact name.
VERL_KEYS_ASKED = (
    "actor/pg_loss",
    "actor/entropy",
    "actor/kl_loss",
    "actor/grad_norm",
    "critic/score/mean",
    "critic/rewards/mean",
    "critic/advantages/mean",
    "critic/advantages/max",
    "critic/advantages/min",
    "response_length/mean",
    "response_length/max",
    "response_length/min",
    "response_length/clip_ratio",
    "prompt_length/mean",
    "prompt_length/max",
    "prompt_length/min",
    "timing_s/gen",
    "timing_s/update_actor",
    "timing_s/step",
    "perf/throughput",
)


def _scored(pid, i, reward, prompt_len, n_tokens, finish="stop", status=Status.CORRECT):
    sample = Sample(f"{pid}/0", pid, i, list(range(prompt_len)), list(range(n_tokens)), "text", None, finish, 0)
    return ScoredSample(
        sample,
        Verdict(status, pid, "cpu", speedup=1.5 if status is Status.CORRECT else None),
        reward,
        {"kernel_reward": reward},
    )


def _groups():
    a = Group("a/0", "a", [_scored("a", 0, 1.0, 10, 4), _scored("a", 1, 0.0, 10, 12, status=Status.INCORRECT)])
    b = Group(
        "b/0",
        "b",
        [_scored("b", 0, 0.5, 30, 16, finish="length"), _scored("b", 1, 0.25, 30, 8, status=Status.INCORRECT)],
    )
    return [a, b]


def _learner_out():
    """What rl.learner.policy.Policy.train_step returns on a CUDA learner with kl_coef > 0."""
    return {
        "loss": 0.3,
        "pg_loss": 0.25,
        "kl_loss": 0.01,
        "kl_ref": 0.02,
        "kl_old": 0.0,
        "entropy": 1.7,
        "grad_norm": 0.9,
        "lr": 1e-5,
        "clip_frac_low": 0.05,
        "clip_frac_high": 0.1,
        "ratio_mean": 1.0,
        "ratio_max": 1.2,
        "ratio_min": 0.8,
        "tokens": 160.0,
        "completion_tokens": 40.0,
        "seconds": 2.0,
        "tokens_per_s": 80.0,
        "max_memory_allocated_gb": 3.5,
        "max_memory_reserved_gb": 4.0,
    }


def _train_row():
    """A training step's row as rl.loop.Trainer.train_step assembles it, validation included."""
    groups = _groups()
    row = rollout_metrics(groups, "train", max_tokens=16)
    row.update(learner_metrics(_learner_out()))
    row.update(batch_metrics(build_train_batch(groups, AlgorithmConfig(), 0), "grpo"))
    seconds = {"generate": 4.0, "evaluate": 3.0, "wait_for_rewards": 1.0, "train": 2.0, "sync": 0.5, "step": 8.0}
    row.update(stage_metrics(seconds))
    row.update(throughput_metrics(row["train/tokens"], seconds["step"], gpus=2))
    row.update(rollout_metrics(groups[:1], "val", max_tokens=16))
    row["time/validate"] = 6.0
    return row


def test_every_verl_key_is_produced_from_a_representative_row_with_the_value_of_ours():
    row = _train_row()
    aliases = verl_aliases(row)
    table = dict(VERL_ALIASES)
    assert len(table) == len(VERL_ALIASES)  # no verl key named twice
    assert set(aliases) == set(table)  # every row of the table has its source in a real step's row
    assert set(VERL_KEYS_ASKED) <= set(aliases)
    for verl, ours in VERL_ALIASES:
        assert aliases[verl] == row[ours], verl
    assert not set(aliases) & set(row)  # an alias never overwrites a key of ours
    # the values, by hand
    assert aliases["actor/pg_loss"] == 0.25 and aliases["actor/kl_loss"] == 0.01
    assert aliases["actor/pg_clipfrac"] == pytest.approx(0.15)  # both sides of the clip
    assert aliases["critic/score/mean"] == pytest.approx(1.75 / 4) and aliases["critic/score/min"] == 0.0
    assert (aliases["response_length/mean"], aliases["response_length/max"], aliases["response_length/min"]) == (
        10.0,
        16,
        4,
    )
    assert aliases["response_length/clip_ratio"] == 0.25  # one of four stopped at max_tokens
    assert (aliases["prompt_length/mean"], aliases["prompt_length/max"], aliases["prompt_length/min"]) == (20.0, 30, 10)
    assert aliases["timing_s/gen"] == 4.0 and aliases["timing_s/update_actor"] == 2.0
    assert aliases["timing_s/step"] == aliases["perf/time_per_step"] == 8.0 and aliases["timing_s/testing"] == 6.0
    assert aliases["perf/throughput"] == pytest.approx(160 / 8 / 2)  # tokens per second per GPU
    assert aliases["perf/max_memory_allocated_gb"] == 3.5


def test_a_verl_key_whose_source_is_absent_is_left_out():
    # a CPU learner without a reference: no KL loss, no memory; no GPU counted: no per-GPU throughput
    out = {
        k: v
        for k, v in _learner_out().items()
        if k not in ("kl_loss", "max_memory_allocated_gb", "max_memory_reserved_gb")
    }
    row = {**learner_metrics(out), **throughput_metrics(160.0, 8.0, gpus=None)}
    aliases = verl_aliases(row)
    assert "actor/kl_loss" not in aliases and "perf/max_memory_allocated_gb" not in aliases
    assert "perf/throughput" not in aliases and row["perf/step_tokens_per_s"] == 20.0
    assert aliases["actor/grad_norm"] == 0.9
    # a validation-only row (step 0): only the testing time has a verl name
    val = {**rollout_metrics(_groups(), "val", 16), "time/validate": 3.0}
    assert verl_aliases(val) == {"timing_s/testing": 3.0}


def test_a_step_without_an_update_keeps_the_learner_columns_nan():
    row = learner_metrics({})
    assert math.isnan(row["train/clip_frac"]) and math.isnan(verl_aliases(row)["actor/pg_loss"])


def test_batch_advantages_are_token_weighted_like_verl_and_max_min_per_row():
    groups = _groups()
    batch = build_train_batch(groups, AlgorithmConfig(advantage="dr_grpo"), 0)
    # dr_grpo: r - group mean -> a: +0.5, -0.5 (4 and 12 tokens); b: +0.125, -0.125 (16 and 8 tokens)
    m = batch_metrics(batch, "dr_grpo")
    assert m["train/advantage_max"] == 0.5 and m["train/advantage_min"] == -0.5
    expected = (0.5 * 4 - 0.5 * 12 + 0.125 * 16 - 0.125 * 8) / 40
    assert m["train/advantage_mean"] == pytest.approx(expected)  # a per-row mean would say 0
    # a loss mask: only its policy tokens weigh
    masked = TrainBatch(
        input_ids=[[0] * 6, [0] * 6],
        prompt_lengths=[2, 2],
        advantages=[1.0, -1.0],
        rollout_logprobs=[None, None],
        group_ids=["g", "g"],
        policy_version=0,
        loss_masks=[[1, 0, 0, 0], None],
    )
    assert batch_metrics(masked, "grpo")["train/advantage_mean"] == pytest.approx((1 - 4) / 5)
    # PPO's batch carries rewards: its advantages come from the value head, in the learner
    assert batch_metrics(build_train_batch(groups, AlgorithmConfig(advantage="gae"), 0), "gae") == {}


def test_rollout_metrics_add_min_reward_min_length_and_prompt_lengths():
    m = rollout_metrics(_groups(), "val", max_tokens=16)
    assert m["val/reward_min"] == 0.0 and m["val/reward_max"] == 1.0
    assert m["val/response_len_min"] == 4 and m["val/prompt_len_mean"] == 20.0
    assert m["val/prompt_len_max"] == 30 and m["val/prompt_len_min"] == 10


def test_throughput_is_per_step_and_per_counted_gpu():
    assert throughput_metrics(100.0, 4.0, gpus=4) == {
        "perf/step_tokens_per_s": 25.0,
        "perf/step_tokens_per_s_per_gpu": 6.25,
    }
    assert throughput_metrics(100.0, 0.0, gpus=4) == {}


def _pool_snapshot():
    """A real PoolMetrics snapshot of two actors, as envs.pool.core's metrics() builds it."""
    m = PoolMetrics()
    for stage, xs in {
        "cpu_stage": [0.01, 0.02],
        "queue_wait": [0.1, 0.3],
        "execution": [1.0, 3.0, 2.0],
        "total": [1.5, 3.5, 2.5],
    }.items():
        for x in xs:
            m.observe(stage, x)
    for name, n in {
        "submitted": 3,
        "answered": 3,
        "cache_hits": 1,
        "cache_misses": 3,
        "actor_failures": 1,
        "actor_restarts": 1,
        "retries": 1,
    }.items():
        m.count(name, n)
    for status in (Status.CORRECT, Status.CORRECT, Status.INCORRECT):
        m.verdict(status)
    depth = {"pending": 0, "preparing": 0, "queued": 2, "parked": 1, "in_flight": 1, "finishing": 0}
    return m.snapshot(
        depth,
        {"actor_1": 0.2, "actor_2": 0.4},
        {
            "actors_alive": 2,
            "actors_starting": 0,
            "capacity": 4,
            "worker_utilization": 0.5,
            "oom_retries": 1,
            "oom_failures": 0,
            "gpu_concurrency_cuts": 1,
        },
    )


def test_pool_summary_is_the_few_keys_and_the_verdict_shares():
    full = _pool_snapshot()
    summary = pool_metrics(full, "summary")
    shares = {f"pool/verdict_frac/{s.value}" for s in Status}
    assert set(summary) == set(POOL_SUMMARY_KEYS) | shares  # every summary key is one the pool reports
    assert all(summary[k] == full[k] for k in summary)
    assert len(full) >= 60 and len(summary) <= 25
    assert summary["pool/queue_depth"] == 3 and summary["pool/cache_hit_rate"] == 0.25
    assert summary["pool/latency/execution_p50_s"] == 2.0 and summary["pool/latency/total_p90_s"] == 3.5
    assert summary["pool/gpu_busy_fraction"] == pytest.approx(0.3)
    assert summary["pool/verdict_frac/correct"] == pytest.approx(2 / 3)
    assert "pool/gpu_busy_fraction/actor_1" not in summary and "pool/latency/total_p99_s" not in summary
    assert pool_metrics(full, "full") == full
    assert pool_metrics({}, "summary") == {}  # an empty snapshot
    with pytest.raises(ValueError, match="summary or full"):
        pool_metrics(full, "some")
