"""TrainBatch.loss_masks: the learner takes the loss only on policy tokens. A masked token (a tool's output
inside a multi-turn row) is context for the tokens after it, but has no logprob, entropy, loss or gradient,
and the normalizers do not count it. Checked against a plain forward of the whole row, by hand."""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from envs.verdict import Status, Verdict  # noqa: E402
from rl.learner.advantages import build_train_batch  # noqa: E402
from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.logprobs import completion_logprobs, pack_rows  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import Group, Sample, ScoredSample, TrainBatch  # noqa: E402

VOCAB = 128
# Two rows: prompt of 4, completion of 8 (policy 3, tool output 3, policy 2) and of 5 (all policy).
IDS = [[5, 9, 17, 3, 40, 41, 42, 100, 101, 102, 43, 44], [7, 8, 9, 10, 60, 61, 62, 63, 64]]
PLENS = [4, 4]
MASKS = [[1, 1, 1, 0, 0, 0, 1, 1], None]
POLICY = [[0, 1, 2, 6, 7], [0, 1, 2, 3, 4]]  # completion offsets the loss is taken on


def full_forward(model, ids):
    """log-softmax and entropy of every position of one unpacked row (the plain way)."""
    logits = model(torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return logp, -(logp.exp() * logp).sum(-1)


def make_policy(algorithm, seed=0):
    cfg = PolicyConfig(
        optimizer=OptimizerSettings(lr=1e-2, eps=1.0), seed=seed, device="cpu", lora=LoraSettings(r=4, alpha=8)
    )
    return Policy(cfg, algorithm, model=tiny_llama(seed=seed, vocab_size=VOCAB))


def test_pack_rows_keeps_only_masked_in_targets():
    for layout in ("packed", "padded"):
        packed = pack_rows(IDS, PLENS, [0, 1], "cpu", layout, MASKS)
        assert packed.seq_lengths.tolist() == [5, 5]
        assert packed.target_ids.tolist() == [40, 41, 42, 43, 44, 60, 61, 62, 63, 64]  # never 100..102
        # row 1 starts after row 0's 11 fed positions in both layouts (padded: the widest row is row 0)
        assert packed.target_positions.tolist() == [3, 4, 5, 9, 10, 14, 15, 16, 17, 18]
    with pytest.raises(ValueError, match="loss mask of 3 for 8"):
        pack_rows(IDS, PLENS, [0], "cpu", "packed", [[1, 0, 1], None])


def test_masked_logprobs_and_entropy_are_those_of_the_policy_tokens_of_the_full_row():
    model = tiny_llama(vocab_size=VOCAB).eval()
    with torch.no_grad():
        logp, entropy = completion_logprobs(model, pack_rows(IDS, PLENS, [0, 1], "cpu", "packed", MASKS))
        for row, offsets in enumerate(POLICY):
            full_logp, full_entropy = full_forward(model, IDS[row])
            positions = [PLENS[row] - 1 + j for j in offsets]
            expected = torch.stack([full_logp[p, IDS[row][p + 1]] for p in positions])
            got = slice(0, 5) if row == 0 else slice(5, 10)
            assert torch.allclose(logp[got], expected, atol=1e-5)
            assert torch.allclose(entropy[got], full_entropy[positions], atol=1e-5)


def _loss_and_grads(policy, masks):
    """The learner's loss for one micro-batch of both rows (GRPO, seq_mean_token_mean, entropy bonus),
    with its gradients, as Policy.train_step computes it."""
    from rl.learner.losses import LossInputs, Normalizer, policy_loss

    policy.model.train()
    policy.model.zero_grad(set_to_none=True)
    packed = pack_rows(IDS, PLENS, [0, 1], "cpu", "packed", masks)
    logp, entropy = completion_logprobs(policy.causal_lm, packed)
    adv = torch.cat([torch.full((int(n),), a) for n, a in zip(packed.seq_lengths, [1.5, -0.5])])
    x = LossInputs(
        logp=logp,
        old_logp=logp.detach(),
        advantages=adv,
        seq_index=packed.seq_index,
        seq_lengths=packed.seq_lengths,
        entropy=entropy,
    )
    loss, _ = policy_loss(x, policy.algorithm, Normalizer(tokens=int(packed.seq_lengths.sum()), seqs=2))
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.requires_grad}


def test_the_loss_and_its_gradient_are_those_of_the_policy_tokens_alone():
    algorithm = AlgorithmConfig(entropy_coef=0.1, tis_cap=None)
    policy = make_policy(algorithm)
    # LoRA's B starts at 0, which leaves A without gradient: move B so every adapter weight has one.
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02, generator=torch.Generator().manual_seed(3))
    loss, grads = _loss_and_grads(policy, MASKS)

    # By hand: ratio 1 on the first update, so per row pg = mean_t(-A * exp(logp_t - sg(logp_t))), whose value
    # is -A and whose gradient is -A * mean_t grad logp_t; the bonus is -0.1 * mean_t entropy_t; rows averaged.
    policy.model.zero_grad(set_to_none=True)
    hand = torch.zeros(())
    for row, (offsets, a) in enumerate(zip(POLICY, [1.5, -0.5])):
        full_logp, full_entropy = full_forward(policy.causal_lm, IDS[row])
        positions = [PLENS[row] - 1 + j for j in offsets]
        lp = torch.stack([full_logp[p, IDS[row][p + 1]] for p in positions])
        hand = hand + (-a * torch.exp(lp - lp.detach())).mean() - 0.1 * full_entropy[positions].mean()
    hand = hand / 2
    hand.backward()
    assert float(loss) == pytest.approx(float(hand.detach()), abs=1e-5)
    for name, p in policy.model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(grads[name], p.grad, atol=1e-6), name

    # Without the mask the tool output would be trained on: a different loss and gradient.
    _, unmasked_grads = _loss_and_grads(policy, None)
    assert any(not torch.allclose(unmasked_grads[n], g, atol=1e-6) for n, g in grads.items())


def test_masked_positions_get_exactly_zero_gradient():
    """The last hidden state at a position predicting a masked token reaches the loss only through that
    token's logit (the last layer's outputs are not attended to): its gradient must be exactly 0."""
    policy = make_policy(AlgorithmConfig(entropy_coef=0.1))
    captured = {}

    def keep(module, args, output):
        output.last_hidden_state.retain_grad()
        captured["h"] = output.last_hidden_state

    handle = policy.causal_lm.get_decoder().register_forward_hook(keep)
    try:
        _loss_and_grads(policy, MASKS)
    finally:
        handle.remove()
    grad = captured["h"].grad[0]  # [fed positions of both rows, hidden]
    per_position = grad.abs().sum(-1)
    masked = [PLENS[0] - 1 + j for j in (3, 4, 5)]  # positions 6, 7, 8 predict the tool output 100..102
    assert per_position[masked].tolist() == [0.0, 0.0, 0.0]
    assert all(per_position[PLENS[0] - 1 + j] > 0 for j in POLICY[0])


def test_train_step_counts_and_logprob_checks_ignore_masked_tokens():
    policy = make_policy(AlgorithmConfig(tis_cap=2.0))
    exact = [[float(x) for x in lp] for lp in policy.logprobs(IDS, PLENS)]
    # The engine's logprobs match the trainer's on policy tokens; masked entries hold garbage (tool output is
    # no sample of the policy): neither the logprob check nor the importance weights may see it.
    rollout = [list(exact[0]), list(exact[1])]
    for j in range(8):
        if not MASKS[0][j]:
            rollout[0][j] = 50.0
    batch = TrainBatch(
        input_ids=IDS,
        prompt_lengths=PLENS,
        advantages=[1.0, -1.0],
        rollout_logprobs=rollout,
        group_ids=["g", "g"],
        policy_version=0,
        loss_masks=MASKS,
    )
    metrics = policy.train_step(batch)
    assert metrics["completion_tokens"] == 10  # 5 + 5 policy tokens, not 8 + 5
    assert metrics["rollout_logprob_diff_max"] < 1e-4 and metrics["tis_ratio_max"] == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="loss mask"):
        policy.train_step(
            TrainBatch(
                input_ids=IDS,
                prompt_lengths=PLENS,
                advantages=[1.0, -1.0],
                rollout_logprobs=[None, None],
                group_ids=["g", "g"],
                policy_version=0,
                loss_masks=[[0] * 8, None],
            )
        )


def test_build_train_batch_carries_sample_masks():
    verdict = Verdict(Status.INCORRECT, "p", "cpu")

    def scored(i, mask, reward):
        sample = Sample("r", "p", i, IDS[0][:4], IDS[0][4:], "", None, "stop", 0, loss_mask=mask)
        return ScoredSample(sample, verdict, reward)

    group = Group("r", "p", [scored(0, MASKS[0], 1.0), scored(1, None, 0.0), scored(2, [0] * 8, 0.5)])
    batch = build_train_batch([group], AlgorithmConfig(), 0)
    assert batch.loss_masks == [MASKS[0], None]  # the all-masked sample has no token to train: dropped
    plain = build_train_batch([Group("r", "p", [scored(0, None, 1.0), scored(1, None, 0.0)])], AlgorithmConfig(), 0)
    assert plain.loss_masks is None
    with pytest.raises(ValueError, match="one 0/1 per completion token"):
        build_train_batch([Group("r", "p", [scored(0, [1, 0], 1.0)])], AlgorithmConfig(), 0)
