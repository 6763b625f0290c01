"""Advantage estimators and DAPO's dynamic-sampling predicate against hand-computed values."""

import math

import pytest

from envs.verdict import Status, Verdict
from rl.learner.advantages import (
    build_train_batch,
    compute_advantages,
    dr_grpo_advantages,
    grpo_advantages,
    has_zero_variance,
    rloo_advantages,
    split_by_variance,
)
from rl.learner.config import AlgorithmConfig, preset
from rl.types import Group, Sample, ScoredSample


def _verdict():
    return Verdict(status=Status.INCORRECT, problem_id="p", device="cpu")


def _group(rewards, request_id="r0", completions=None, logprobs=None):
    samples = []
    for i, r in enumerate(rewards):
        comp = completions[i] if completions else [10 + i, 11 + i]
        lp = logprobs[i] if logprobs else [-0.5] * len(comp)
        s = Sample(
            request_id=request_id,
            problem_id="p",
            index=i,
            prompt_ids=[1, 2, 3],
            completion_ids=comp,
            text="",
            logprobs=lp,
            finish_reason="stop",
            policy_version=0,
        )
        samples.append(ScoredSample(sample=s, verdict=_verdict(), reward=r))
    return Group(request_id=request_id, problem_id="p", samples=samples)


def test_grpo_normalizes_by_unbiased_std():
    # mean 0.5, unbiased std sqrt(1/3) = 0.57735
    adv = grpo_advantages([1.0, 0.0, 0.0, 1.0], eps=0.0)
    assert adv == pytest.approx([0.866025, -0.866025, -0.866025, 0.866025], abs=1e-6)
    # mean 2, std 1: the eps sits in the denominator
    assert grpo_advantages([1.0, 2.0, 3.0], eps=1e-6) == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)])


def test_dr_grpo_only_subtracts_the_mean():
    assert dr_grpo_advantages([1.0, 2.0, 3.0]) == pytest.approx([-1.0, 0.0, 1.0])
    assert dr_grpo_advantages([0.2, 0.2, 0.8]) == pytest.approx([-0.2, -0.2, 0.4])


def test_rloo_uses_the_mean_of_the_others():
    # 1 - (2+3)/2, 2 - (1+3)/2, 3 - (1+2)/2
    assert rloo_advantages([1.0, 2.0, 3.0]) == pytest.approx([-1.5, 0.0, 1.5])
    # n/(n-1) times the mean-centred reward
    r = [0.1, 0.7, 0.4, 0.9]
    mean = sum(r) / 4
    assert rloo_advantages(r) == pytest.approx([4 / 3 * (x - mean) for x in r])


def test_single_sample_and_equal_rewards_give_zero():
    for f in (grpo_advantages, dr_grpo_advantages, rloo_advantages):
        assert f([0.7]) == [0.0]
        assert f([0.5, 0.5, 0.5]) == pytest.approx([0.0, 0.0, 0.0])


def test_compute_advantages_follows_the_config():
    groups = [_group([1.0, 2.0, 3.0]), _group([0.0, 1.0], "r1")]
    rloo = compute_advantages(groups, AlgorithmConfig.from_mapping({"name": "rloo"}))
    assert rloo[0] == pytest.approx([-1.5, 0.0, 1.5]) and rloo[1] == pytest.approx([-1.0, 1.0])
    dr = compute_advantages(groups, preset("dr_grpo"))
    assert dr[1] == pytest.approx([-0.5, 0.5])
    grpo = compute_advantages(groups, preset("grpo"))
    assert grpo[1] == pytest.approx([-0.5 / (math.sqrt(0.5) + 1e-6), 0.5 / (math.sqrt(0.5) + 1e-6)])


def test_dynamic_sampling_drops_zero_variance_groups():
    all_wrong, all_right, mixed = _group([0.0] * 4, "a"), _group([0.73] * 4, "b"), _group([0.0, 0.73, 0, 0], "c")
    assert has_zero_variance(all_wrong) and has_zero_variance(all_right) and not has_zero_variance(mixed)
    keep, drop = split_by_variance([all_wrong, mixed, all_right])
    assert [g.request_id for g in keep] == ["c"] and [g.request_id for g in drop] == ["a", "b"]


def test_build_train_batch_flattens_groups():
    groups = [_group([1.0, 0.0], "a", completions=[[5], [6, 7]]), _group([0.0, 1.0, 2.0], "b")]
    batch = build_train_batch(groups, preset("dr_grpo"), policy_version=3)
    assert batch.input_ids[0] == [1, 2, 3, 5] and batch.input_ids[1] == [1, 2, 3, 6, 7]
    assert batch.prompt_lengths == [3] * 5
    assert batch.advantages == pytest.approx([0.5, -0.5, -1.0, 0.0, 1.0])
    assert batch.group_ids == ["a", "a", "b", "b", "b"] and batch.policy_version == 3
    assert batch.rollout_logprobs[1] == [-0.5, -0.5]


def test_build_train_batch_refuses_mismatched_logprobs_and_drops_empty_completions():
    with pytest.raises(ValueError, match="2 logprobs for 1 completion tokens"):
        build_train_batch([_group([1.0, 0.0], completions=[[5], [6]], logprobs=[[-1, -1], [-1]])], preset("grpo"), 0)
    batch = build_train_batch([_group([1.0, 0.0], completions=[[], [6]], logprobs=[[], [-1]])], preset("dr_grpo"), 0)
    assert batch.input_ids == [[1, 2, 3, 6]] and batch.advantages == pytest.approx([-0.5])


def test_algorithm_presets_and_unknown_keys():
    dapo = AlgorithmConfig.from_mapping({"name": "dapo", "kl_coef": 0.01})
    assert (dapo.clip_eps_high, dapo.loss_aggregation, dapo.dynamic_sampling, dapo.kl_coef) == (
        0.28,
        "token_mean",
        True,
        0.01,
    )
    with pytest.raises(ValueError, match="unknown algorithm settings"):
        AlgorithmConfig.from_mapping({"name": "grpo", "clip_eps": 0.2})
    with pytest.raises(ValueError, match="unknown algorithm 'ppo2'"):
        AlgorithmConfig.from_mapping({"name": "ppo2"})
    with pytest.raises(ValueError, match="loss_aggregation"):
        AlgorithmConfig(loss_aggregation="mean")


def test_samples_the_environment_failed_on_are_left_out_of_the_advantages():
    """An internal_error (the GPU out of memory because of other processes) is no verdict on the sample: its
    reward of 0 must not count as a failure of the policy (rl.types.Group.judged, used by the loop)."""
    group = _group([0.6, 0.0, 0.0])
    statuses = [Status.CORRECT, Status.INTERNAL_ERROR, Status.INCORRECT]
    group = Group(
        group.request_id,
        group.problem_id,
        [
            ScoredSample(s.sample, Verdict(status=st, problem_id="p", device="cpu"), s.reward)
            for s, st in zip(group.samples, statuses)
        ],
    )
    judged = group.judged()
    assert [s.verdict.status for s in judged.samples] == [Status.CORRECT, Status.INCORRECT]
    batch = build_train_batch([judged], AlgorithmConfig(), policy_version=0)
    assert batch.advantages == pytest.approx(grpo_advantages([0.6, 0.0], eps=1e-6))
    assert len(batch.input_ids) == 2
    # with all three, the environment's failure would have pulled the correct kernel's advantage down
    assert compute_advantages([group], AlgorithmConfig())[0][0] != pytest.approx(batch.advantages[0])
    failed = Verdict(status=Status.INTERNAL_ERROR, problem_id="p", device="cpu")
    everything_failed = Group("r1", "p", [ScoredSample(s.sample, failed, 0.0) for s in group.samples])
    assert everything_failed.judged().samples == []  # the loop drops the group
    untouched = _group([1.0, 0.0])
    assert untouched.judged() is untouched
