"""PPO (algorithm=ppo) on multi-turn rows with a loss mask: the rule (docs/algorithms.md, "PPO on multi-turn
trajectories") is that the critic, GAE and both losses see policy tokens only. Values exist only at positions that
predict a policy token; GAE runs over the policy tokens in order, so the last token of a turn bootstraps from the
value of the next turn's first token (the state after the tool output), and tool-output tokens are neither time
steps nor discounted; whitening, the value loss and the policy loss count policy tokens only. Hand-computed on a
2-turn trajectory with a tool output in the middle, then a real PPO learner step on a tiny random model."""

import pytest
import torch

from rl.learner.config import PPOSettings
from rl.learner.ppo import gae, token_advantages

# One completion: turn 1 (3 policy tokens), a tool output (3 tokens), turn 2 (2 policy tokens).
MASK = [1, 1, 1, 0, 0, 0, 1, 1]


def masked_gae_reference(rewards, values, mask, gamma, lam):
    """The same rule stated over the whole completion, as verl's compute_gae_advantage_return does it (a masked
    token carries the running advantage and next value through unchanged): what our policy-token-only GAE must
    equal, whatever the values at masked positions are."""
    n = len(rewards)
    adv, next_value, running = [0.0] * n, 0.0, 0.0
    for t in range(n - 1, -1, -1):
        if mask[t]:
            running = rewards[t] + gamma * next_value - values[t] + gamma * lam * running
            next_value = values[t]
        adv[t] = running
    return adv


def test_gae_bridges_the_tool_output_by_hand():
    # policy-token values V(a1..a3, b1, b2) = .5 .4 .3 .6 .8; outcome reward 1 on b2; gamma 1, lambda .5
    # delta_b2 = 1 - .8 = .2                      A_b2 = .2
    # delta_b1 = .8 - .6 = .2                     A_b1 = .2 + .5 * .2 = .3
    # delta_a3 = V(b1) - .3 = .3 (the bridge)     A_a3 = .3 + .5 * .3 = .45
    # delta_a2 = .3 - .4 = -.1                    A_a2 = -.1 + .5 * .45 = .125
    # delta_a1 = .4 - .5 = -.1                    A_a1 = -.1 + .5 * .125 = -.0375
    values = torch.tensor([0.5, 0.4, 0.3, 0.6, 0.8])
    adv, ret = gae(torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]), values, gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([-0.0375, 0.125, 0.45, 0.3, 0.2]))
    assert torch.allclose(ret, torch.tensor([0.4625, 0.525, 0.75, 0.9, 1.0]))
    # the full-completion statement of the rule gives the same at policy tokens, whatever the masked values
    full_values = [0.5, 0.4, 0.3, 9.0, -7.0, 3.0, 0.6, 0.8]
    reference = masked_gae_reference([0.0] * 7 + [1.0], full_values, MASK, 1.0, 0.5)
    assert torch.allclose(adv, torch.tensor([r for r, m in zip(reference, MASK) if m]))


def test_discounting_counts_policy_tokens_only():
    # gamma .9, lambda 1: returns are the reward discounted once per POLICY token to go: b2 1, b1 .9, a3 .81
    # (not .9^4: the tool output's three tokens are no time steps), a2 .729, a1 .6561; values do not matter
    s = PPOSettings(gamma=0.9, lam=1.0, whiten_advantages=False)
    _, (ret,) = token_advantages([1.0], [torch.tensor([0.2, -0.1, 0.4, 0.3, 0.5])], s)
    assert torch.allclose(ret, torch.tensor([0.6561, 0.729, 0.81, 0.9, 1.0]))


pytest.importorskip("transformers")
pytest.importorskip("peft")

from envs.verdict import Status, Verdict  # noqa: E402
from rl.learner.advantages import build_train_batch  # noqa: E402
from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.rollout.trajectory_record import Trajectory, Turn  # noqa: E402
from rl.rollout.trajectory_scoring import trajectory_groups  # noqa: E402
from rl.types import RolloutRequest, SamplingConfig  # noqa: E402

VOCAB = 128
PROMPT, TURN1, TOOL_OUTPUT, TURN2 = [5, 9, 17, 3], [40, 41, 42], [100, 101, 102], [43, 44]
LAM = 0.9


def ppo_policy(**ppo):
    # tis_cap off: the made-up engine logprobs below would reweight the surrogate (not what these tests are about)
    algorithm = AlgorithmConfig.from_mapping(
        {"name": "ppo", "tis_cap": None, "ppo": {"gamma": 1.0, "lam": LAM, "value_lr": 0.05, **ppo}}
    )
    config = PolicyConfig(optimizer=OptimizerSettings(lr=1e-3), device="cpu", lora=LoraSettings(r=4, alpha=8))
    return Policy(config, algorithm, model=tiny_llama(vocab_size=VOCAB))


def trajectory(index, turns, reward):
    verdict = Verdict(Status.CORRECT if reward else Status.INCORRECT, "p", "cpu")
    return Trajectory(
        f"r#{index}", "r", "p", index, 0, turns, [], "", verdict, reward, [reward] * len(turns), "final", "submit"
    )


def multi_turn_batch(algorithm):
    """Two trajectories of one group through the real path (Trajectory.training_rows -> trajectory_groups ->
    build_train_batch): a 2-turn one with a tool output between its turns (reward 1), a 1-turn one (reward 0)."""
    second_prompt = PROMPT + TURN1 + TOOL_OUTPUT
    two_turns = [
        Turn(0, PROMPT, TURN1, [-0.5] * 3, "", "stop", 0.0),
        Turn(1, second_prompt, TURN2, [-0.5] * 2, "", "stop", 0.0),
    ]
    one_turn = [Turn(0, PROMPT, [60, 61], [-0.5] * 2, "", "stop", 0.0)]
    request = RolloutRequest("r", "p", [], SamplingConfig(n=2))
    groups = trajectory_groups([request], [trajectory(0, two_turns, 1.0), trajectory(1, one_turn, 0.0)], "concat")
    return build_train_batch(groups, algorithm, 0)


def test_the_batch_of_a_two_turn_trajectory_masks_its_tool_output():
    batch = multi_turn_batch(AlgorithmConfig.from_mapping({"name": "ppo"}))
    assert batch.input_ids[0] == PROMPT + TURN1 + TOOL_OUTPUT + TURN2 and batch.prompt_lengths == [4, 4]
    assert batch.loss_masks == [MASK, [1, 1]] and batch.rewards == [1.0, 0.0]


def test_values_are_read_at_the_positions_predicting_policy_tokens():
    policy = ppo_policy()
    with torch.no_grad():
        policy.value_head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(0))
    batch = multi_turn_batch(policy.algorithm)
    _, values = policy._score(batch.input_ids, batch.prompt_lengths, with_values=True, loss_masks=batch.loss_masks)
    assert [v.numel() for v in values] == [5, 2]
    with torch.no_grad():  # by hand: the head on the full row's last hidden state, at position p - 1 + j
        ids = batch.input_ids[0]
        hidden = policy.causal_lm.get_decoder()(input_ids=torch.tensor([ids[:-1]])).last_hidden_state[0]
        positions = [4 - 1 + j for j, m in enumerate(MASK) if m]  # 3, 4, 5, 9, 10: b1's value reads position 9,
        expected = policy.value_head(hidden[positions]).squeeze(-1)  # the last tool-output token (the state after it)
    assert torch.allclose(values[0], expected, atol=1e-5)


def test_a_ppo_step_on_a_masked_multi_turn_batch():
    policy = ppo_policy()
    batch = multi_turn_batch(policy.algorithm)
    captured = {}

    def keep(module, args, output):  # the last hidden state of the training forward (the scoring pass has no grad)
        if output.last_hidden_state.requires_grad:
            output.last_hidden_state.retain_grad()
            captured["h"] = output.last_hidden_state

    handle = policy.causal_lm.get_decoder().register_forward_hook(keep)
    try:
        first = policy.train_step(batch)
    finally:
        handle.remove()
    # By hand, with the zero-initialised head (V = 0 everywhere): A_t = R_t = lambda^(policy tokens to go) * reward,
    # over the 5 policy tokens of row 0 (lam^4 .. 1) and the 2 of row 1 (0, 0): 7 tokens, the tool output none.
    returns = [LAM**k for k in (4, 3, 2, 1, 0)] + [0.0, 0.0]
    assert first["completion_tokens"] == 7
    assert first["returns_mean"] == pytest.approx(sum(returns) / 7, abs=1e-6)
    assert first["value_error_sq"] == pytest.approx(sum(r * r for r in returns) / 7, abs=1e-6)
    assert first["value_loss"] == pytest.approx(0.5 * sum(r * r for r in returns) / 7, abs=1e-6)  # token_mean
    # whitened over exactly the loss's tokens: mean 0 there, so at ratio 1 the token-mean surrogate is 0
    assert abs(first["advantages_mean"]) < 1e-6 and abs(first["pg_loss"]) < 1e-6
    # no policy loss and no value loss at the tool output: the hidden states predicting it get exactly 0 gradient
    grad = captured["h"].grad[0].abs().sum(-1)  # row 0 is the longest, packed or padded: positions 0..10
    tool_positions = [4 - 1 + j for j, m in enumerate(MASK) if not m]  # 6, 7, 8
    assert grad[tool_positions].tolist() == [0.0, 0.0, 0.0]
    assert all(grad[p] > 0 for p in (3, 4, 5, 9, 10))
    for _ in range(4):
        last = policy.train_step(batch)
    assert last["value_error_sq"] < first["value_error_sq"] and last["value_grad_norm"] > 0
