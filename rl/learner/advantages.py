"""Sequence-level advantages from group rewards, DAPO's dynamic-sampling predicate, and TrainBatch assembly.

Every estimator here is outcome-based: one scalar per sample, broadcast over its completion tokens by
the loss. Formulas and sources: docs/algorithms.md.
"""

from __future__ import annotations

import math
from typing import Sequence

from rl.learner.config import AlgorithmConfig
from rl.types import Group, TrainBatch

# Rewards closer than this count as equal: a group with no spread has no learning signal.
ZERO_VARIANCE_TOLERANCE = 1e-9


def grpo_advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """(r_i - mean) / (std + eps), std with Bessel's correction (as torch.std); one sample: 0."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def dr_grpo_advantages(rewards: Sequence[float]) -> list[float]:
    """r_i - mean: Dr. GRPO drops the std division (it over-weights groups that are nearly all equal)."""
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    return [r - mean for r in rewards]


def rloo_advantages(rewards: Sequence[float]) -> list[float]:
    """r_i - mean of the other n-1 rewards (the leave-one-out baseline keeps the estimate unbiased)."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def group_advantages(rewards: Sequence[float], config: AlgorithmConfig) -> list[float]:
    if config.advantage == "grpo":
        return grpo_advantages(rewards, config.std_eps)
    if config.advantage == "dr_grpo":
        return dr_grpo_advantages(rewards)
    if config.advantage == "rloo":
        return rloo_advantages(rewards)
    if config.advantage == "gae":
        # PPO: the learner's value head is the baseline (rl.learner.ppo); the batch carries the raw rewards
        return [float(r) for r in rewards]
    raise ValueError(f"unknown advantage estimator {config.advantage!r}")


def compute_advantages(groups: Sequence[Group], config: AlgorithmConfig) -> list[list[float]]:
    """One list per group, one advantage per sample, in the group's sample order."""
    return [group_advantages(g.rewards, config) for g in groups]


def has_zero_variance(group: Group, tolerance: float = ZERO_VARIANCE_TOLERANCE) -> bool:
    """True when all rewards of the group are equal: every advantage is 0 and the group teaches nothing."""
    rewards = group.rewards
    return not rewards or max(rewards) - min(rewards) <= tolerance


def split_by_variance(groups: Sequence[Group]) -> tuple[list[Group], list[Group]]:
    """DAPO's dynamic sampling: (groups to keep, zero-variance groups to drop). The loop refills the batch."""
    keep, drop = [], []
    for g in groups:
        (drop if has_zero_variance(g) else keep).append(g)
    return keep, drop


def build_train_batch(groups: Sequence[Group], config: AlgorithmConfig, policy_version: int) -> TrainBatch:
    """Flatten groups into the learner's rows: prompt + completion ids, advantage, rollout logprobs, and the
    loss mask of samples that carry one (multi-turn rows: tool outputs are not the policy's tokens)."""
    if not groups:
        raise ValueError("build_train_batch needs at least one group")
    input_ids, prompt_lengths, advantages, rollout_logprobs, group_ids, rewards = [], [], [], [], [], []
    loss_masks: list[list[int] | None] = []
    for group, group_adv in zip(groups, compute_advantages(groups, config)):
        for scored, adv in zip(group.samples, group_adv):
            s = scored.sample
            if not s.completion_ids:
                # An empty completion has no token to carry the advantage; it is dropped, not zero-padded.
                continue
            if s.logprobs is not None and len(s.logprobs) != len(s.completion_ids):
                raise ValueError(
                    f"sample {s.request_id}#{s.index}: {len(s.logprobs)} logprobs "
                    f"for {len(s.completion_ids)} completion tokens"
                )
            if s.loss_mask is not None:
                if len(s.loss_mask) != len(s.completion_ids) or set(s.loss_mask) - {0, 1}:
                    raise ValueError(
                        f"sample {s.request_id}#{s.index}: its loss mask must be one 0/1 per "
                        f"completion token ({len(s.loss_mask)} for {len(s.completion_ids)})"
                    )
                if 1 not in s.loss_mask:
                    continue  # no policy token to carry the advantage, like an empty completion
            input_ids.append(list(s.prompt_ids) + list(s.completion_ids))
            loss_masks.append(None if s.loss_mask is None else [int(m) for m in s.loss_mask])
            prompt_lengths.append(len(s.prompt_ids))
            advantages.append(float(adv))
            rollout_logprobs.append(None if s.logprobs is None else [float(x) for x in s.logprobs])
            group_ids.append(group.request_id)
            rewards.append(float(scored.reward))
    if not input_ids:
        raise ValueError("every sample of the batch has an empty completion")
    return TrainBatch(
        input_ids=input_ids,
        prompt_lengths=prompt_lengths,
        advantages=advantages,
        rollout_logprobs=rollout_logprobs,
        group_ids=group_ids,
        policy_version=policy_version,
        rewards=rewards,
        loss_masks=loss_masks if any(m is not None for m in loss_masks) else None,
    )
