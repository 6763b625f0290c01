"""Reward modes of a multi-turn trajectory (TrajectoryConfig.reward_mode).

- `final`: the reward of the final answer only (Makora's single attempt: the tools help, only the answer counts).
- `best`: the best reward over the answers the turns proposed (and the final one).
- `discounted`: Kevin-32B's per-turn returns: turn t's return is G_t = r_t + gamma * G_{t+1}, r_t the reward
  of the answer turn t proposed (0 if none), each turn a training sample with its own return; the
  trajectory's reward is G_0.
Turn rewards are the per-answer rewards the runner computed (rewards/kernel_reward.py plus the run's shaping).
"""

from __future__ import annotations

from typing import Literal, Sequence

RewardMode = Literal["final", "best", "discounted"]
REWARD_MODES = ("final", "best", "discounted")


def discounted_returns(turn_rewards: Sequence[float], gamma: float) -> list[float]:
    returns = [0.0] * len(turn_rewards)
    running = 0.0
    for t in range(len(turn_rewards) - 1, -1, -1):
        running = turn_rewards[t] + gamma * running
        returns[t] = running
    return returns


def trajectory_reward(
    mode: RewardMode, final_reward: float, turn_rewards: Sequence[float], gamma: float = 0.4
) -> tuple[float, list[float]]:
    """(the trajectory's reward, one return per turn). In `final` and `best` every turn carries the
    trajectory's reward (a concat row or a per-turn row trains on the same number)."""
    if mode == "final":
        return final_reward, [final_reward] * len(turn_rewards)
    if mode == "best":
        best = max([final_reward, *turn_rewards])
        return best, [best] * len(turn_rewards)
    if mode == "discounted":
        if not 0.0 <= gamma <= 1.0:
            raise ValueError("gamma must be in [0, 1]")
        returns = discounted_returns(turn_rewards, gamma)
        return (returns[0] if returns else final_reward), returns
    raise ValueError(f"reward_mode must be one of {REWARD_MODES}, not {mode!r}")
