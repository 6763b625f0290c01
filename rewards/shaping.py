"""The reward the learner sees: the kernel reward of the verdict plus optional, documented shaping.

    reward = kernel_reward(verdict; delta) + overlong + format          (each part kept in reward_parts)

`overlong` is DAPO's soft overlong punishment (Yu et al. 2025, section 3.4; off with `overlong_buffer: null`);
`format` subtracts `format_penalty` unless the answer is an honest attempt (code that parses and defines
ModelNew, no detected hack), so a cold-starting model's groups are not all zeros. A detected hack earns what
prose earns: below any honest wrong kernel. Formulas: docs/algorithms.md."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from envs.settings import reject_unknown
from envs.guard import guarded
from envs.source import CanonicalSolution, prepare_solution
from envs.verdict import Status, Verdict
from rewards.kernel_reward import DEFAULT_DELTA, check_delta, reward_for_verdict

__all__ = ["RewardConfig", "has_candidate", "overlong_penalty", "shaped_reward"]


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    delta: float = DEFAULT_DELTA  # the kernel reward's shift (the top-level `delta` of the Hydra config)
    overlong_buffer: int | None = None  # DAPO: tokens before max_tokens where the penalty ramps in; None: off
    overlong_penalty: float = 1.0  # DAPO uses 1.0 (the full reward scale)
    format_penalty: float = 0.0  # subtracted when the answer defines no ModelNew; 0: off

    def __post_init__(self) -> None:
        object.__setattr__(self, "delta", check_delta(self.delta))
        if self.overlong_buffer is not None and self.overlong_buffer < 1:
            raise ValueError("reward.overlong_buffer must be >= 1 (or null to turn it off)")
        if self.overlong_penalty < 0 or self.format_penalty < 0:
            raise ValueError("reward.overlong_penalty and reward.format_penalty must be >= 0")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> RewardConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "reward")
        return cls(**m)


def overlong_penalty(n_tokens: int, max_tokens: int, buffer: int, penalty: float = 1.0) -> float:
    """DAPO's soft overlong punishment, <= 0."""
    start = max_tokens - buffer
    if n_tokens <= start:
        return 0.0
    if n_tokens >= max_tokens:
        return -penalty
    return (start - n_tokens) / buffer * penalty


def has_candidate(text: str) -> bool:
    """Whether the answer holds code that parses and defines ModelNew (what the evaluator needs to start)."""
    return isinstance(guarded("format", prepare_solution, text), CanonicalSolution)


def shaped_reward(
    verdict: Verdict, text: str, n_tokens: int, max_tokens: int, config: RewardConfig
) -> tuple[float, dict[str, float]]:
    """The reward and its parts for one sample."""
    parts = {"kernel_reward": reward_for_verdict(verdict, config.delta)}
    if config.overlong_buffer is not None:
        parts["overlong"] = overlong_penalty(n_tokens, max_tokens, config.overlong_buffer, config.overlong_penalty)
    if config.format_penalty:
        honest = verdict.status is not Status.HACK and has_candidate(text)
        parts["format"] = 0.0 if honest else -config.format_penalty
    return sum(parts.values()), parts
