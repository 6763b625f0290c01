"""Reward functions: map an evaluation verdict to a scalar for RL."""

from rewards.makora import DEFAULT_DELTA, makora_reward, reward_for_verdict

__all__ = ["DEFAULT_DELTA", "makora_reward", "reward_for_verdict"]
