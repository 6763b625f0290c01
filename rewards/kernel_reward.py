"""The kernel reward: a verdict from envs/ turned into the scalar RL optimises, here and nowhere else.

Formula from "Fine-Tuning GPT-5 for GPU Kernel Generation" (Makora, 2026):

    V = 0                                        if the kernel is not correct (or is a detected hack)
    V = sigmoid(1[valid] + max(0, speedup) - delta)   otherwise

The constant 1 rewards validity; the speedup term rewards being fast; delta shifts the sigmoid so
that only kernels near or above baseline speed get most of the reward (delta = 1.8: parity with
the baseline gives sigmoid(0.2) ~= 0.55, a 2x speedup sigmoid(1.2) ~= 0.77). Without a measured
speedup (CPU evaluation under the Triton interpreter) the speedup term is 0: V = sigmoid(1 - delta).
"""

from __future__ import annotations

import math
from typing import Callable

from envs.verdict import Status, Verdict

DEFAULT_DELTA = 1.8


def check_delta(delta: object) -> float:
    """`delta` as a float, or ValueError naming it: a config's string ("abc"), NaN or infinity would otherwise
    surface only at the first reward, after the work it rewards."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta):
        raise ValueError(f"delta must be a finite number, not {delta!r}")
    return float(delta)


def kernel_reward(correct: bool, speedup: float | None, delta: float = DEFAULT_DELTA) -> float:
    delta = check_delta(delta)
    if not correct:
        return 0.0
    if speedup is not None and not math.isfinite(speedup):
        # An infinite or NaN speedup is a measurement failure, never a reward.
        return 0.0
    r_raw = 1.0 + max(0.0, speedup or 0.0)
    return 1.0 / (1.0 + math.exp(-(r_raw - delta)))


def reward_for_verdict(verdict: Verdict, delta: float = DEFAULT_DELTA) -> float:
    """Reward of a verdict; any status other than `correct` (a hack included) earns 0."""
    return kernel_reward(verdict.status is Status.CORRECT and verdict.hack is None, verdict.speedup, delta)


def reward_function(delta: float = DEFAULT_DELTA) -> Callable[[Verdict, float | None], float]:
    """`reward(verdict, delta_override)` for components that must not import rewards/ (the HTTP service, tools):
    the run's delta unless a request gives its own."""
    delta = check_delta(delta)

    def reward(verdict: Verdict, override: float | None = None) -> float:
        return reward_for_verdict(verdict, delta if override is None else override)

    return reward
