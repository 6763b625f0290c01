"""Reward functions: map an evaluation verdict to a scalar for RL."""

from rewards.kernel_reward import DEFAULT_DELTA, kernel_reward, reward_for_verdict, reward_function

__all__ = ["DEFAULT_DELTA", "kernel_reward", "reward_for_verdict", "reward_function"]
