"""Token-level policy-gradient loss: clipped ratio (clip-higher), aggregation modes, KL to a reference,
entropy bonus, truncated importance sampling against the rollout engine, and the step's metrics.

Pure functions on flat tensors of completion tokens: every tensor has one entry per token, and
`seq_index[t]` names the sequence token t belongs to. This layout is the same for padded and packed
batches, and the normalizers (`Normalizer`) are those of the whole mini-batch, so the losses of its
micro-batches add up exactly to the mini-batch's loss. Formulas and sources: docs/algorithms.md.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from rl.learner.config import AlgorithmConfig


@dataclasses.dataclass(frozen=True)
class Normalizer:
    """Counts of the whole mini-batch that one optimizer step averages over."""

    tokens: int  # completion tokens
    seqs: int  # sequences
    max_tokens: int | None = None  # Dr. GRPO's constant length (seq_mean_token_sum_norm)


def aggregate(
    values: torch.Tensor, seq_index: torch.Tensor, seq_lengths: torch.Tensor, mode: str, norm: Normalizer
) -> torch.Tensor:
    """Reduce per-token values to the scalar the optimizer sees.

    token_mean: sum / tokens (DAPO); seq_mean_token_mean: mean over sequences of each one's token mean
    (GRPO); seq_mean_token_sum_norm: sum / (seqs * max_tokens) (Dr. GRPO).
    """
    if mode == "token_mean":
        return values.sum() / norm.tokens
    if mode == "seq_mean_token_mean":
        return (values / seq_lengths[seq_index].to(values.dtype)).sum() / norm.seqs
    if mode == "seq_mean_token_sum_norm":
        if norm.max_tokens is None:
            raise ValueError("seq_mean_token_sum_norm needs the constant max_tokens (loss_max_tokens)")
        return values.sum() / (norm.seqs * norm.max_tokens)
    raise ValueError(f"unknown loss aggregation {mode!r}")


def clipped_policy_gradient(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float
):
    """Per-token PPO surrogate max(-A r, -A clip(r, 1-eps_low, 1+eps_high)) with r = exp(logp - old_logp).

    Returns (loss per token, ratio, clipped_low, clipped_high): the masks mark tokens whose gradient the
    clip removed (A < 0 and r below the range; A > 0 and r above it).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    clipped_low = (adv < 0) & (ratio < 1.0 - eps_low)
    clipped_high = (adv > 0) & (ratio > 1.0 + eps_high)
    return loss, ratio, clipped_low, clipped_high


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from the sampled token's logprobs.

    k1 = logp - ref_logp (unbiased, can be negative); k3 = exp(ref - logp) - (ref - logp) - 1
    (unbiased, always >= 0, lower variance).
    """
    if estimator == "k1":
        return logp - ref_logp
    if estimator == "k3":
        log_ratio = ref_logp - logp
        return torch.exp(log_ratio) - log_ratio - 1.0
    raise ValueError(f"unknown KL estimator {estimator!r}")


def tis_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncated importance weight min(exp(old_logp - rollout_logp), cap), detached; also the raw ratio."""
    raw = torch.exp(old_logp.detach() - rollout_logp)
    return raw.clamp(max=cap), raw


@dataclasses.dataclass
class LossInputs:
    """Per completion token of one micro-batch (float32 logprobs)."""

    logp: torch.Tensor  # current policy, with grad
    old_logp: torch.Tensor  # the policy before this batch's first update (detached)
    advantages: torch.Tensor  # per token (the sequence's advantage broadcast)
    seq_index: torch.Tensor  # long, local sequence index of each token
    seq_lengths: torch.Tensor  # long, completion tokens per local sequence
    ref_logp: torch.Tensor | None = None  # frozen reference (needed when kl_coef > 0)
    entropy: torch.Tensor | None = None  # per-token entropy of the current policy (with grad)
    rollout_logp: torch.Tensor | None = None  # the engine's logprobs (NaN where a row has none)


class Stats:
    """Metric accumulator across micro-batches: token-weighted sums, maxima and minima."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, float] = {}
        self.maxes: dict[str, float] = {}
        self.mins: dict[str, float] = {}
        self.totals: dict[str, float] = {}  # additive scalars reported as they are (the loss terms)

    def add_mean(self, name: str, total: torch.Tensor | float, count: int | float) -> None:
        if count:
            self.sums[name] = self.sums.get(name, 0.0) + float(total)
            self.counts[name] = self.counts.get(name, 0.0) + float(count)

    def add_total(self, name: str, value: torch.Tensor | float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + float(value)

    def add_max(self, name: str, value: torch.Tensor | float) -> None:
        self.maxes[name] = max(self.maxes.get(name, -math.inf), float(value))

    def add_min(self, name: str, value: torch.Tensor | float) -> None:
        self.mins[name] = min(self.mins.get(name, math.inf), float(value))

    def merge(self, other: Stats) -> None:
        for name, total in other.sums.items():
            self.add_mean(name, total, other.counts[name])
        for name, value in other.totals.items():
            self.add_total(name, value)
        for name, value in other.maxes.items():
            self.add_max(name, value)
        for name, value in other.mins.items():
            self.add_min(name, value)

    def result(self) -> dict[str, float]:
        out = {name: self.sums[name] / self.counts[name] for name in self.sums}
        out.update(self.totals)
        out.update(self.maxes)
        out.update(self.mins)
        return out


def policy_loss(x: LossInputs, config: AlgorithmConfig, norm: Normalizer) -> tuple[torch.Tensor, Stats]:
    """The micro-batch's share of the mini-batch loss, and its metrics.

    loss = agg(pg * w_tis) + kl_coef * agg(kl) - entropy_coef * agg(entropy), `agg` per
    config.loss_aggregation with the mini-batch normalizers, w_tis = min(exp(old - rollout), tis_cap).
    """
    stats = Stats()
    n = x.logp.numel()
    agg = lambda v: aggregate(v, x.seq_index, x.seq_lengths, config.loss_aggregation, norm)  # noqa: E731

    pg, ratio, clipped_low, clipped_high = clipped_policy_gradient(
        x.logp, x.old_logp, x.advantages, config.clip_eps_low, config.clip_eps_high
    )

    if x.rollout_logp is not None:
        has_rollout = ~torch.isnan(x.rollout_logp)
        m = int(has_rollout.sum())
        if m:
            old = x.old_logp.detach()[has_rollout]
            rollout = x.rollout_logp[has_rollout]
            diff = (old - rollout).abs()
            stats.add_mean("rollout_logprob_diff_mean", diff.sum(), m)
            stats.add_max("rollout_logprob_diff_max", diff.max())
            if config.tis_cap is not None:
                weight, raw = tis_weights(old, rollout, config.tis_cap)
                stats.add_mean("tis_ratio_mean", raw.sum(), m)
                stats.add_max("tis_ratio_max", raw.max())
                stats.add_min("tis_ratio_min", raw.min())
                stats.add_mean("tis_clip_frac", (raw > config.tis_cap).sum(), m)
                full_weight = torch.ones_like(pg)
                full_weight[has_rollout] = weight.to(pg.dtype)
                pg = pg * full_weight

    pg_loss = agg(pg)
    loss = pg_loss
    stats.add_total("pg_loss", pg_loss.detach())

    if config.kl_coef > 0:
        if x.ref_logp is None:
            raise ValueError("kl_coef > 0 needs the reference logprobs")
        kl = kl_estimate(x.logp, x.ref_logp, config.kl_estimator)
        kl_loss = agg(kl)
        loss = loss + config.kl_coef * kl_loss
        stats.add_total("kl_loss", kl_loss.detach())
    if x.ref_logp is not None:
        stats.add_mean("kl_ref", kl_estimate(x.logp.detach(), x.ref_logp, config.kl_estimator).sum(), n)

    if x.entropy is not None:
        if config.entropy_coef > 0:
            entropy_loss = agg(x.entropy)
            loss = loss - config.entropy_coef * entropy_loss
            stats.add_total("entropy_loss", entropy_loss.detach())
        stats.add_mean("entropy", x.entropy.detach().sum(), n)

    stats.add_total("loss", loss.detach())
    stats.add_mean("clip_frac_low", clipped_low.sum(), n)
    stats.add_mean("clip_frac_high", clipped_high.sum(), n)
    # KL(old || current) by k3 on the sampled tokens: 0 on the first update of a batch.
    stats.add_mean("kl_old", kl_estimate(x.old_logp, x.logp.detach(), "k3").sum(), n)
    stats.add_mean("ratio_mean", ratio.detach().sum(), n)
    stats.add_max("ratio_max", ratio.detach().max())
    stats.add_min("ratio_min", ratio.detach().min())
    return loss, stats
