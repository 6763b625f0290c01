"""layout=prefix: rows sharing a prompt run it once and attend to its KV cache; everything equals the padded layout."""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.logprobs import (  # noqa: E402
    completion_outputs,
    pack_rows,
    plan_micro_batches,
    plan_prefix_micro_batches,
)
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

VOCAB = 128


def mixed_rows():
    """Rows in mixed order: group A (prompt 7; completions of 1, 4, 6, 3 tokens), group B (prompt 11; 5, 5, 1),
    a row whose prompt nobody shares (9 tokens), group C (prompt 5, two one-token completions: nothing to feed
    after the prompt). Loss masks on two rows (a masked token is context, not a target)."""
    g = torch.Generator().manual_seed(3)
    rand = lambda n: torch.randint(0, VOCAB, (n,), generator=g).tolist()  # noqa: E731
    a, b, c = rand(7), rand(11), rand(5)
    spec = [(a, 1), (b, 5), (a, 4), (rand(9), 4), (a, 6), (c, 1), (b, 5), (a, 3), (b, 1), (c, 1)]
    ids = [prompt + rand(n) for prompt, n in spec]
    plens = [len(prompt) for prompt, _ in spec]
    masks = [None] * len(ids)
    masks[4] = [1, 0, 0, 1, 1, 1]
    masks[6] = [0, 1, 1, 0, 1]
    return ids, plens, masks


def per_row(packed, *tensors):
    return {row: [t[packed.seq_index == local] for t in tensors] for local, row in enumerate(packed.rows)}


def outputs(model, head, ids, plens, masks, layout, budget=100_000):
    """Per row: (logprobs, entropy, values) from micro-batches of `layout`, and the micro-batches' PackedRows."""
    if layout == "prefix":
        plan = plan_prefix_micro_batches(ids, plens, budget)
    else:
        plan = plan_micro_batches([len(s) for s in ids], budget, layout)
    result, packs = {}, []
    for mb in plan:
        packed = pack_rows(ids, plens, mb, "cpu", layout, masks)
        logp, entropy, values = completion_outputs(model, packed, chunk_tokens=4, value_head=head)
        result.update(per_row(packed, logp, entropy, values))
        packs.append(packed)
    return result, packs


def test_prefix_plan_groups_shared_prompts_and_splits_over_the_budget():
    ids, plens, _ = mixed_rows()
    plan = plan_prefix_micro_batches(ids, plens, 100_000)
    # groups in the order of their first row, then the row nobody shares (padded)
    assert plan == [[0, 2, 4, 7], [1, 6, 8], [5, 9], [3]]
    assert plan_prefix_micro_batches(ids, plens, 100_000) == plan  # deterministic
    # group A: P = 7, fed completions 0, 3, 5, 2. Budget 7 + 2 * 5 = 17: longest first, chunks of rows
    small = plan_prefix_micro_batches(ids, plens, 17)
    assert small[:2] == [[2, 4], [0, 7]]  # (4: 5 fed, 2: 3 fed) = 7 + 2 * 5; (7: 2 fed, 0: 0 fed) = 7 + 2 * 2
    assert sorted(i for mb in small for i in mb) == list(range(len(ids)))
    for mb in small:
        p = plens[mb[0]]
        shared = all(ids[r][: plens[r]] == ids[mb[0]][:p] for r in mb)
        width = max(len(ids[r]) - p - 1 for r in mb)
        assert len(mb) == 1 or not shared or p + len(mb) * width <= 17
    # a row over the budget still gets a micro-batch of its own
    assert [4] in plan_prefix_micro_batches(ids, plens, 1)


def test_prefix_packing_lays_out_the_prompt_once():
    ids, plens, masks = mixed_rows()
    packed = pack_rows(ids, plens, [0, 2, 4, 7], "cpu", "prefix", masks)
    assert packed.prompt_ids.tolist() == [ids[0][:7]]
    assert packed.input_ids.shape == (4, 5) and packed.attention_mask.shape == (4, 12)
    assert packed.position_ids[0].tolist() == [7, 8, 9, 10, 11]
    # row 0 (one token) and every row's first target: the prompt's last position
    first = [packed.target_positions[packed.seq_index == local][0].item() for local in range(4)]
    assert first == [6, 6, 6, 6]
    assert packed.seq_lengths.tolist() == [1, 4, 4, 3]  # row 4's mask keeps 4 of 6
    # a micro-batch of rows with different prompts is padded
    assert pack_rows(ids, plens, [0, 1], "cpu", "prefix").prompt_ids is None
    # equal completions need no mask; one-token completions feed nothing after the prompt
    assert pack_rows(ids, plens, [1, 6], "cpu", "prefix").attention_mask is None
    assert pack_rows(ids, plens, [5, 9], "cpu", "prefix").input_ids.shape == (2, 0)


@pytest.mark.parametrize("masked", [False, True])
def test_prefix_logprobs_entropy_and_values_equal_the_padded_layout(masked):
    ids, plens, masks = mixed_rows()
    masks = masks if masked else None
    model = tiny_llama(vocab_size=VOCAB).eval()
    head = torch.nn.Linear(model.config.hidden_size, 1)
    with torch.no_grad():
        padded, _ = outputs(model, head, ids, plens, masks, "padded")
        prefix, packs = outputs(model, head, ids, plens, masks, "prefix")
    assert sum(p.prompt_ids is not None for p in packs) == 3
    assert sorted(prefix) == sorted(padded) == list(range(len(ids)))
    for row in padded:
        for want, got in zip(padded[row], prefix[row]):
            assert want.shape == got.shape and want.numel() > 0
            assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), row


def _loss(model, head, ids, plens, masks, layout, budget=100_000):
    out, _ = outputs(model, head, ids, plens, masks, layout, budget)
    total = 0.0
    for row, (logp, entropy, values) in out.items():
        w = (row % 3) - 1.0 + 0.25  # a different weight per row: the prompt's gradient is a weighted sum
        total = total + w * logp.sum() + 0.1 * entropy.sum() + (values - 0.5).pow(2).sum()
    return total


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_prefix_gradients_equal_the_padded_layout(finetune):
    ids, plens, masks = mixed_rows()
    grads = {}
    for layout, budget in (("padded", 100_000), ("prefix", 100_000), ("prefix", 17)):
        model = tiny_llama(vocab_size=VOCAB)
        if finetune == "lora":
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"])
            model = get_peft_model(model, config)
            # B starts at zero: give it values so that the adapters' gradients depend on the whole path
            torch.manual_seed(1)
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    torch.nn.init.normal_(p, std=0.1)
        model.train()
        causal_lm = model.get_base_model() if finetune == "lora" else model
        torch.manual_seed(2)
        head = torch.nn.Linear(causal_lm.config.hidden_size, 1)
        _loss(causal_lm, head, ids, plens, masks, layout, budget).backward()
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad] + list(head.named_parameters())
        grads[(layout, budget)] = {n: p.grad.clone() for n, p in named if p.grad is not None}
    want = grads[("padded", 100_000)]
    assert len(want) > 10 and all(g.abs().sum() > 0 for g in want.values())
    for key in (("prefix", 100_000), ("prefix", 17)):
        assert sorted(grads[key]) == sorted(want)
        for name, g in want.items():
            assert torch.allclose(grads[key][name], g, atol=1e-5, rtol=1e-4), (key, name)


def _batch(with_masks=True):
    ids, plens, masks = mixed_rows()
    n = len(ids)
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=plens,
        advantages=[((i * 7) % 5 - 2) / 2 for i in range(n)],
        rollout_logprobs=[None] * n,
        group_ids=[str(i) for i in range(n)],
        policy_version=0,
        loss_masks=masks if with_masks else None,
        rewards=[float(i % 2) for i in range(n)],
    )


@pytest.mark.parametrize(
    "finetune,algorithm",
    [
        ("lora", {"name": "grpo", "kl_coef": 0.1, "entropy_coef": 0.01}),  # reference: the adapter disabled
        ("full", {"name": "grpo", "kl_coef": 0.1, "mini_batches": 2}),  # reference: a frozen copy
        ("lora", {"name": "ppo", "ppo_epochs": 2}),  # values, old logprobs recomputed (_score under no_grad)
    ],
)
def test_prefix_train_step_updates_the_weights_as_padded(finetune, algorithm):
    states, metrics = {}, {}
    for layout, budget in (("padded", 8192), ("prefix", 8192), ("prefix", 17)):
        cfg = PolicyConfig(
            finetune=finetune,
            lora=LoraSettings(r=4, alpha=8),
            optimizer=OptimizerSettings(lr=1e-2, eps=1.0),  # eps 1: the update is proportional to the gradient
            device="cpu",
            layout=layout,
            micro_batch_tokens=budget,
            logprob_chunk_tokens=5,
        )
        policy = Policy(cfg, AlgorithmConfig.from_mapping(algorithm), model=tiny_llama(vocab_size=VOCAB))
        metrics[(layout, budget)] = policy.train_step(_batch())
        states[(layout, budget)] = {k: v.detach().clone() for k, v in policy.trainable_state().items()}
    want = states[("padded", 8192)]
    for key in (("prefix", 8192), ("prefix", 17)):
        assert metrics[key]["grad_norm"] == pytest.approx(metrics[("padded", 8192)]["grad_norm"], rel=1e-4)
        for name, p in want.items():
            assert torch.allclose(states[key][name], p, atol=1e-7, rtol=1e-5), (key, name)
    initial = Policy(
        PolicyConfig(finetune=finetune, lora=LoraSettings(r=4, alpha=8), device="cpu"),
        AlgorithmConfig.from_mapping(algorithm),
        model=tiny_llama(vocab_size=VOCAB),
    ).trainable_state()
    assert any(not torch.equal(initial[name], p) for name, p in want.items())  # the step moved the weights


def test_prefix_logprobs_of_the_policy_equal_padded():
    ids, plens, _ = mixed_rows()
    got = {}
    for layout in ("padded", "prefix"):
        cfg = PolicyConfig(lora=LoraSettings(r=4, alpha=8), device="cpu", layout=layout)
        got[layout] = Policy(cfg, AlgorithmConfig(), model=tiny_llama(vocab_size=VOCAB)).logprobs(ids, plens)
    for a, b in zip(got["padded"], got["prefix"]):
        assert a == pytest.approx(b, abs=1e-5)


@pytest.mark.parametrize("option", [{"gradient_checkpointing": True}, {"compile": True}, {"world_size": 2}])
def test_prefix_refuses_what_it_does_not_support(option):
    with pytest.raises(ValueError, match="layout=prefix"):
        PolicyConfig(layout="prefix", **option)
    with pytest.raises(ValueError, match="layout must be"):
        PolicyConfig(layout="shared")
