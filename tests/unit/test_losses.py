"""The token-level loss pieces and their metrics against hand-computed values."""

import math

import pytest
import torch

from rl.learner.config import AlgorithmConfig
from rl.learner.losses import (
    LossInputs,
    Normalizer,
    Stats,
    aggregate,
    clipped_policy_gradient,
    kl_estimate,
    policy_loss,
    tis_weights,
)

LOG = math.log


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def test_clip_higher_surrogate_and_clip_masks():
    old = t([0.0, 0.0, 0.0, 0.0])
    logp = t([LOG(1.5), LOG(0.5), LOG(1.1), LOG(0.7)])
    adv = t([1.0, -1.0, -1.0, 1.0])
    loss, ratio, low, high = clipped_policy_gradient(logp, old, adv, eps_low=0.2, eps_high=0.28)
    assert ratio.tolist() == pytest.approx([1.5, 0.5, 1.1, 0.7], rel=1e-6)
    # r=1.5, A=1: max(-1.5, -1.28); r=0.5, A=-1: max(0.5, 0.8); r=1.1, A=-1: 1.1; r=0.7, A=1: max(-0.7, -0.8)
    assert loss.tolist() == pytest.approx([-1.28, 0.8, 1.1, -0.7], rel=1e-6)
    assert high.tolist() == [True, False, False, False]
    assert low.tolist() == [False, True, False, False]


def test_clipped_tokens_get_no_gradient():
    logp = t([LOG(1.5), LOG(0.5), LOG(1.1), LOG(0.7)]).requires_grad_()
    loss, ratio, _, _ = clipped_policy_gradient(logp, torch.zeros(4), t([1.0, -1.0, -1.0, 1.0]), 0.2, 0.28)
    loss.sum().backward()
    # d(-A r)/d logp = -A r where unclipped
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, 1.1, -0.7], rel=1e-6)


def test_kl_estimators():
    logp, ref = t([-1.0, -2.0]), t([-2.0, -1.0])
    assert kl_estimate(logp, ref, "k1").tolist() == pytest.approx([1.0, -1.0])
    # k3 = exp(ref - logp) - (ref - logp) - 1
    assert kl_estimate(logp, ref, "k3").tolist() == pytest.approx([math.exp(-1), math.e - 2], rel=1e-6)
    assert kl_estimate(logp, logp, "k3").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError):
        kl_estimate(logp, ref, "k2")


def test_aggregation_modes():
    v = t([1.0, 2.0, 3.0, 4.0, 5.0])
    idx, lengths = torch.tensor([0, 0, 1, 1, 1]), torch.tensor([2, 3])
    norm = Normalizer(tokens=5, seqs=2, max_tokens=10)
    assert float(aggregate(v, idx, lengths, "token_mean", norm)) == pytest.approx(3.0)
    assert float(aggregate(v, idx, lengths, "seq_mean_token_mean", norm)) == pytest.approx((1.5 + 4.0) / 2)
    assert float(aggregate(v, idx, lengths, "seq_mean_token_sum_norm", norm)) == pytest.approx(15 / 20)


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_micro_batches_add_up_to_the_mini_batch(mode):
    v = t([1.0, 2.0, 3.0, 4.0, 5.0])
    norm = Normalizer(tokens=5, seqs=2, max_tokens=10)
    whole = aggregate(v, torch.tensor([0, 0, 1, 1, 1]), torch.tensor([2, 3]), mode, norm)
    first = aggregate(v[:2], torch.tensor([0, 0]), torch.tensor([2]), mode, norm)
    second = aggregate(v[2:], torch.tensor([0, 0, 0]), torch.tensor([3]), mode, norm)
    assert float(first + second) == pytest.approx(float(whole))


def test_tis_weight_is_truncated_and_detached():
    old = t([-1.0, -1.0]).requires_grad_()
    w, raw = tis_weights(old, t([-1.5, -0.5]), cap=1.5)
    assert raw.tolist() == pytest.approx([math.exp(0.5), math.exp(-0.5)], rel=1e-6)
    assert w.tolist() == pytest.approx([1.5, math.exp(-0.5)], rel=1e-6)
    assert not w.requires_grad


def _inputs(**kw):
    base = dict(
        logp=t([LOG(1.5), LOG(0.5), LOG(1.1), LOG(0.7)]) - 1.0,
        old_logp=t([-1.0] * 4),
        advantages=t([1.0, -1.0, -1.0, 1.0]),
        seq_index=torch.tensor([0, 0, 1, 1]),
        seq_lengths=torch.tensor([2, 2]),
    )
    base.update(kw)
    base["logp"] = base["logp"].clone().requires_grad_()
    return LossInputs(**base)


def test_policy_loss_token_mean_with_tis_kl_and_entropy():
    cfg = AlgorithmConfig(
        clip_eps_low=0.2,
        clip_eps_high=0.28,
        loss_aggregation="token_mean",
        kl_coef=0.1,
        kl_estimator="k1",
        entropy_coef=0.01,
        tis_cap=1.5,
    )
    # rollout logprobs: token 0 far below the trainer's (weight exp(1)=2.718 capped at 1.5), token 1 none
    x = _inputs(
        ref_logp=t([-1.0] * 4), entropy=t([2.0, 1.0, 3.0, 2.0]), rollout_logp=t([-2.0, float("nan"), -1.0, -0.9])
    )
    loss, stats = policy_loss(x, cfg, Normalizer(tokens=4, seqs=2))
    pg = [-1.28 * 1.5, 0.8 * 1.0, 1.1 * 1.0, -0.7 * math.exp(-0.1)]
    kl = [LOG(1.5), LOG(0.5), LOG(1.1), LOG(0.7)]  # logp - ref
    expected = sum(pg) / 4 + 0.1 * sum(kl) / 4 - 0.01 * 8.0 / 4
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    m = stats.result()
    assert m["loss"] == pytest.approx(expected, rel=1e-5)
    assert m["pg_loss"] == pytest.approx(sum(pg) / 4, rel=1e-5)
    assert m["clip_frac_low"] == pytest.approx(0.25) and m["clip_frac_high"] == pytest.approx(0.25)
    assert m["entropy"] == pytest.approx(2.0)
    assert m["kl_ref"] == pytest.approx(sum(kl) / 4, rel=1e-5)
    # |old - rollout| over the 3 tokens that have one: 1, 0, 0.1
    assert m["rollout_logprob_diff_mean"] == pytest.approx(1.1 / 3, rel=1e-5)
    assert m["rollout_logprob_diff_max"] == pytest.approx(1.0, rel=1e-5)
    assert m["tis_ratio_max"] == pytest.approx(math.e, rel=1e-5)
    assert m["tis_ratio_min"] == pytest.approx(math.exp(-0.1), rel=1e-5)
    assert m["tis_clip_frac"] == pytest.approx(1 / 3)
    assert m["ratio_max"] == pytest.approx(1.5, rel=1e-5) and m["ratio_min"] == pytest.approx(0.5, rel=1e-5)
    # k3 of KL(old || new) on sampled tokens: exp(d) - d - 1 with d = logp - old
    kl_old = sum(math.exp(d) - d - 1 for d in kl) / 4
    assert m["kl_old"] == pytest.approx(kl_old, rel=1e-5)
    loss.backward()
    # gradient: TIS-weighted -A r / N where unclipped, plus kl_coef / N (k1's derivative is 1)
    grad = [0.0 + 0.1 / 4, 0.0 + 0.1 / 4, 1.1 / 4 + 0.1 / 4, -0.7 * math.exp(-0.1) / 4 + 0.1 / 4]
    assert x.logp.grad.tolist() == pytest.approx(grad, rel=1e-5)


def test_policy_loss_grpo_sequence_mean_without_options():
    cfg = AlgorithmConfig(loss_aggregation="seq_mean_token_mean", clip_eps_low=0.2, clip_eps_high=0.28, tis_cap=None)
    x = _inputs(rollout_logp=t([-1.0, -1.2, -0.9, -1.0]))
    loss, stats = policy_loss(x, cfg, Normalizer(tokens=4, seqs=2))
    # ((-1.28 + 0.8) / 2 + (1.1 - 0.7) / 2) / 2
    assert float(loss.detach()) == pytest.approx(((-1.28 + 0.8) / 2 + (1.1 - 0.7) / 2) / 2, rel=1e-6)
    m = stats.result()
    assert "kl_ref" not in m and "tis_ratio_mean" not in m and "entropy" not in m
    # the engine is compared with the trainer's logprobs before the update (old_logp = -1)
    assert m["rollout_logprob_diff_mean"] == pytest.approx(0.3 / 4, rel=1e-5)
    assert m["rollout_logprob_diff_max"] == pytest.approx(0.2, rel=1e-5)


def test_dr_grpo_sum_norm_and_missing_reference():
    cfg = AlgorithmConfig(
        advantage="dr_grpo",
        loss_aggregation="seq_mean_token_sum_norm",
        loss_max_tokens=8,
        clip_eps_high=0.28,
        tis_cap=None,
    )
    loss, _ = policy_loss(_inputs(), cfg, Normalizer(tokens=4, seqs=2, max_tokens=8))
    assert float(loss.detach()) == pytest.approx((-1.28 + 0.8 + 1.1 - 0.7) / 16, rel=1e-6)
    with pytest.raises(ValueError, match="reference"):
        policy_loss(_inputs(), AlgorithmConfig(kl_coef=0.1), Normalizer(tokens=4, seqs=2))


def test_stats_merge_weights_by_tokens():
    a, b = Stats(), Stats()
    a.add_mean("entropy", 6.0, 3)
    b.add_mean("entropy", 2.0, 1)
    a.add_max("m", 1.0)
    b.add_max("m", 3.0)
    a.add_total("loss", 0.25)
    b.add_total("loss", 0.5)
    a.merge(b)
    assert a.result() == {"entropy": 2.0, "m": 3.0, "loss": 0.75}
