"""PPO (rl.learner.ppo): GAE and the clipped value loss against hand-computed values, and the critic in a step."""

import pytest
import torch

from rl.learner.config import AlgorithmConfig, PPOSettings
from rl.learner.ppo import gae, token_advantages, value_loss


def test_gae_by_hand_lambda_half():
    # rewards 0, 0, 1 (the outcome on the last token), V = .5 .6 .7, gamma 1, lambda .5:
    # delta = (.6-.5, .7-.6, 1-.7) = (.1, .1, .3); A2 = .3, A1 = .1 + .5*.3 = .25, A0 = .1 + .5*.25 = .225
    adv, ret = gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.6, 0.7]), gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([0.225, 0.25, 0.3]))
    assert torch.allclose(ret, torch.tensor([0.725, 0.85, 1.0]))


def test_gae_with_lambda_one_gives_discounted_returns():
    # gamma .9, lambda 1: delta = (.9*.6-.5, .9*.7-.6, 1-.7) = (.04, .03, .3); A = (.31, .3, .3)
    # and the returns are the discounted rewards-to-go (.81, .9, 1), whatever the values
    adv, ret = gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.6, 0.7]), gamma=0.9, lam=1.0)
    assert torch.allclose(adv, torch.tensor([0.31, 0.3, 0.3]))
    assert torch.allclose(ret, torch.tensor([0.81, 0.9, 1.0]))


def test_gae_with_lambda_zero_is_one_step_td():
    adv, _ = gae(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 0.5]), gamma=1.0, lam=0.0)
    assert torch.allclose(adv, torch.tensor([0.5 - 1.0, 2.0 - 0.5]))


def test_value_loss_by_hand():
    values = torch.tensor([1.0, 0.0], requires_grad=True)
    old, returns = torch.tensor([0.5, 0.1]), torch.tensor([2.0, 0.0])
    # token 0: unclipped (1-2)^2 = 1; clipped value .5 + .2 = .7, (.7-2)^2 = 1.69 -> .5 * 1.69 = .845 (clipped wins)
    # token 1: unclipped 0; clipped .1 - .1 = 0 -> 0
    loss, clipped = value_loss(values, old, returns, clip=0.2)
    assert torch.allclose(loss, torch.tensor([0.845, 0.0]))
    assert clipped.tolist() == [True, False]
    loss.sum().backward()
    assert values.grad[0] == 0  # the clipped term is constant in V: no gradient through that token
    unclipped, mask = value_loss(torch.tensor([1.0, 0.0]), old, returns, clip=None)
    assert torch.allclose(unclipped, torch.tensor([0.5, 0.0])) and not mask.any()


def test_token_advantages_whiten_over_the_whole_batch():
    s = PPOSettings(gamma=1.0, lam=1.0, whiten_advantages=True)
    adv, ret = token_advantages([1.0, 0.0], [torch.zeros(3), torch.zeros(2)], s)
    flat = torch.cat(adv)
    assert abs(float(flat.mean())) < 1e-6 and abs(float(flat.std(unbiased=False)) - 1) < 1e-5
    assert torch.allclose(torch.cat(ret), torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]))  # returns are not whitened


def test_ppo_preset_and_settings_are_checked():
    cfg = AlgorithmConfig.from_mapping({"name": "ppo", "ppo": {"lam": 0.9}})
    assert cfg.uses_critic and cfg.ppo.lam == 0.9 and cfg.ppo.gamma == 1.0
    with pytest.raises(ValueError, match="unknown"):
        AlgorithmConfig.from_mapping({"name": "ppo", "ppo": {"lamda": 0.9}})
    with pytest.raises(ValueError, match="gamma"):
        PPOSettings(gamma=1.5)


def test_a_ppo_policy_trains_its_value_head():
    pytest.importorskip("transformers")
    from rl.learner.config import OptimizerSettings, PolicyConfig
    from rl.learner.policy import Policy
    from rl.learner.random_models import tiny_llama
    from rl.types import TrainBatch

    policy = Policy(
        PolicyConfig(device="cpu", finetune="full", optimizer=OptimizerSettings(lr=1e-3)),
        AlgorithmConfig.from_mapping({"name": "ppo", "ppo": {"value_lr": 0.05}}),
        model=tiny_llama(vocab_size=64),
    )
    ids = [[1, 2, 3, 4, 5, 6], [1, 2, 7, 8, 9]]
    batch = TrainBatch(
        input_ids=ids,
        prompt_lengths=[2, 2],
        advantages=[1.0, 0.0],
        rollout_logprobs=[None, None],
        group_ids=["g", "g"],
        policy_version=0,
        rewards=[1.0, 0.0],
    )
    first = policy.train_step(batch)
    assert first["values_mean"] == 0  # zero-initialised head
    for _ in range(5):
        last = policy.train_step(batch)
    assert last["value_error_sq"] < first["value_error_sq"] and last["value_grad_norm"] > 0
    with pytest.raises(ValueError, match="rewards"):
        policy.train_step(
            TrainBatch(
                input_ids=ids,
                prompt_lengths=[2, 2],
                advantages=[1.0, 0.0],
                rollout_logprobs=[None, None],
                group_ids=["g", "g"],
                policy_version=0,
            )
        )
