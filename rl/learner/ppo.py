"""PPO with a learned value baseline (`algorithm=ppo`, advantage `gae`): GAE, the clipped value loss, and the
per-token advantages the policy-gradient loss (rl.learner.losses) consumes.

The critic is a value head on the policy's last hidden state (rl.learner.logprobs.PolicyNet), its loss weighted
by `ppo.vf_coef` into the shared backbone. The reward is the outcome reward on the last completion token. With a
loss mask (multi-turn rows) GAE runs over the policy tokens only: tool-output tokens are no time steps and get
no value, advantage or loss, as in verl's compute_gae_advantage_return. Formulas and sources: docs/algorithms.md;
the masking rule in full: docs/learner.md."""

from __future__ import annotations

from typing import Sequence

import torch

from rl.learner.config import PPOSettings
from rl.learner.losses import Stats


def gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over one completion (Schulman et al. 2016).

    rewards[t], values[t] for t = 0..T-1 (values[t] = V(s_t), the state before token t); the state after the
    last token is terminal (V = 0). delta_t = r_t + gamma V_{t+1} - V_t, A_t = sum_l (gamma lam)^l delta_{t+l},
    returns R_t = A_t + V_t. Returns (advantages, returns), float32, detached.
    """
    if rewards.shape != values.shape or rewards.dim() != 1:
        raise ValueError(
            f"gae needs 1-d rewards and values of one length, not {tuple(rewards.shape)} and {tuple(values.shape)}"
        )
    # The recursion runs over Python floats on the host (one copy each way): on tensors it was ~7 tiny ops per
    # token, each a kernel launch on a GPU, which cost more than the whole GRPO step at 10^4 completion tokens.
    r, v = rewards.detach().double().cpu().tolist(), values.detach().double().cpu().tolist()
    advantages = [0.0] * len(r)
    running, next_value = 0.0, 0.0
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * next_value - v[t] + gamma * lam * running
        advantages[t] = running
        next_value = v[t]
    adv = torch.tensor(advantages, dtype=torch.float32, device=values.device)
    return adv, adv + values.detach().float()


def outcome_rewards(length: int, reward: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """The outcome reward on the last completion token, 0 on the others."""
    r = torch.zeros(length, dtype=torch.float32, device=device)
    r[-1] = reward
    return r


def token_advantages(
    rewards: Sequence[float], old_values: Sequence[torch.Tensor], s: PPOSettings
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per row: (advantages, returns) over its completion tokens, advantages whitened over the whole batch
    when `s.whiten_advantages` (mean 0, std 1 over every token of every row; returns are not)."""
    advantages, returns = [], []
    for reward, values in zip(rewards, old_values):
        adv, ret = gae(outcome_rewards(values.numel(), reward, values.device), values, s.gamma, s.lam)
        advantages.append(adv)
        returns.append(ret)
    if s.whiten_advantages:
        flat = torch.cat(advantages)
        mean = flat.mean()
        std = flat.std(unbiased=False) if flat.numel() > 1 else torch.ones((), device=flat.device)
        advantages = [(a - mean) / (std + 1e-8) for a in advantages]
    return advantages, returns


def value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token 0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) (unclipped: 0.5 (V - R)^2);
    also the mask of tokens where the clipped term is the larger one (its gradient is then zero)."""
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    clipped_values = old_values + (values - old_values).clamp(-clip, clip)
    clipped = (clipped_values - returns) ** 2
    return 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped


def value_stats(
    values: torch.Tensor, returns: torch.Tensor, advantages: torch.Tensor, clipped: torch.Tensor, loss: torch.Tensor
) -> Stats:
    s = Stats()
    n = values.numel()
    s.add_total("value_loss", loss.detach())
    s.add_mean("value_clip_frac", clipped.sum(), n)
    s.add_mean("values_mean", values.detach().sum(), n)
    s.add_mean("returns_mean", returns.sum(), n)
    s.add_mean("advantages_mean", advantages.sum(), n)
    s.add_mean("value_error_sq", ((values.detach() - returns) ** 2).sum(), n)
    return s
