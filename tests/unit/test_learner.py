"""The policy on tiny random Llama models: packing, chunking, updates, reference, export, checkpoints."""

import os

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.logprobs import completion_logprobs, pack_rows, plan_micro_batches  # noqa: E402
from rl.learner.optim import lr_factor  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

VOCAB = 128


def rows(n=6, seed=1, prompt=5):
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, VOCAB, (prompt + 4 + 3 * i,), generator=g).tolist() for i in range(n)]
    return ids, [prompt] * n


def batch(n=6, seed=1, advantages=None, rollout=None):
    ids, plens = rows(n, seed)
    adv = advantages or [1.0 if i % 2 == 0 else -1.0 for i in range(n)]
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=plens,
        advantages=adv,
        rollout_logprobs=rollout or [None] * n,
        group_ids=["g"] * n,
        policy_version=0,
    )


def make_policy(lr=1e-2, seed=0, algorithm=None, adam_eps=1e-8, **policy_kw):
    policy_kw.setdefault("lora", LoraSettings(r=4, alpha=8))
    cfg = PolicyConfig(optimizer=OptimizerSettings(lr=lr, eps=adam_eps), seed=seed, device="cpu", **policy_kw)
    return Policy(cfg, algorithm or AlgorithmConfig(), model=tiny_llama(seed=seed, vocab_size=VOCAB))


def reference_logprobs(model, ids, plen):
    """The plain way: one unpacked forward of the full model, log-softmax of all logits."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return torch.stack([logp[t - 1, ids[t]] for t in range(plen, len(ids))])


def test_micro_batch_plan_respects_the_budget():
    lengths = [10, 3, 7, 8, 2, 30]
    packed = plan_micro_batches(lengths, token_budget=12, layout="packed")
    padded = plan_micro_batches(lengths, token_budget=16, layout="padded")
    for plan, cost in (
        (packed, lambda b: sum(lengths[i] for i in b)),
        (padded, lambda b: len(b) * max(lengths[i] for i in b)),
    ):
        assert sorted(i for b in plan for i in b) == list(range(6))
        assert [5] in plan  # longer than the budget: alone
        assert all(len(b) == 1 or cost(b) <= (12 if plan is packed else 16) for b in plan)
    # padded, longest first: 10 alone (2 x 10 > 16), 8 and 7 together (2 x 8 = 16), then 3 and 2
    assert padded == [[5], [0], [2, 3], [1, 4]]


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_laid_out_chunked_logprobs_equal_the_plain_forward(layout):
    model = tiny_llama(vocab_size=VOCAB).eval()
    ids, plens = rows(4)
    packed = pack_rows(ids, plens, [2, 0, 3], "cpu", layout)
    assert (packed.attention_mask is not None) == (layout == "padded")  # unequal lengths: padded needs a mask
    with torch.no_grad():
        logp, entropy = completion_logprobs(model, packed, chunk_tokens=5)
    for local, row in enumerate([2, 0, 3]):
        got = logp[packed.seq_index == local]
        assert torch.allclose(got, reference_logprobs(model, ids[row], plens[row]), atol=1e-5)
    assert (entropy > 0).all() and (entropy <= torch.log(torch.tensor(float(VOCAB))) + 1e-4).all()


def test_a_values_only_pass_gives_the_values_of_the_full_pass():
    # PPO's scoring pass for the old values skips the lm_head; the values are those of a pass with logprobs
    from rl.learner.logprobs import completion_outputs

    model = tiny_llama(vocab_size=VOCAB).eval()
    head = torch.nn.Linear(model.config.hidden_size, 1)
    packed = pack_rows(*rows(4), [2, 0, 3], "cpu", "padded")
    with torch.no_grad():
        logp, entropy, values = completion_outputs(model, packed, chunk_tokens=5, value_head=head)
        none_logp, none_entropy, only_values = completion_outputs(model, packed, value_head=head, with_logprobs=False)
    assert none_logp is None and none_entropy is None and logp.shape == values.shape == packed.target_ids.shape
    assert torch.equal(only_values, values) and values.abs().sum() > 0


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_chunking_and_micro_batching_do_not_change_the_update(layout):
    b = batch()
    # A large Adam eps makes the update proportional to the gradient (Adam's first step is otherwise
    # sign(g) * lr, which turns rounding noise in near-zero gradients into full-size differences).
    small = make_policy(micro_batch_tokens=16, logprob_chunk_tokens=3, adam_eps=1.0, layout=layout)
    large = make_policy(micro_batch_tokens=100_000, logprob_chunk_tokens=4096, adam_eps=1.0, layout=layout)
    m_small, m_large = small.train_step(b), large.train_step(b)
    assert m_small["grad_norm"] == pytest.approx(m_large["grad_norm"], rel=1e-4)
    for (name, p), q in zip(small.trainable_state().items(), large.trainable_state().values()):
        assert torch.allclose(p, q, atol=1e-8), name


def test_gradient_checkpointing_gives_the_same_gradients():
    b = batch()
    plain, ckpt = make_policy(), make_policy(gradient_checkpointing=True)
    assert plain.train_step(b)["grad_norm"] == pytest.approx(ckpt.train_step(b)["grad_norm"], rel=1e-5)


def surrogate(policy, b):
    """Advantage-weighted mean completion logprob: the GRPO step must raise it on its own batch."""
    logps = policy.logprobs(b.input_ids, b.prompt_lengths)
    return sum(a * sum(lp) / len(lp) for a, lp in zip(b.advantages, logps)) / len(logps)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "dapo", "rloo"])
def test_a_step_lowers_the_loss_on_fixed_data(name):
    algorithm = AlgorithmConfig.from_mapping({"name": name, "loss_max_tokens": 32})
    policy, b = make_policy(algorithm=algorithm), batch()
    before = surrogate(policy, b)
    metrics = policy.train_step(b)
    after = surrogate(policy, b)
    # the loss is -surrogate (up to aggregation): lower loss = higher surrogate
    assert after > before + 1e-3, (before, after)
    assert metrics["kl_old"] == pytest.approx(0.0, abs=1e-7) and metrics["ratio_max"] == pytest.approx(1.0)
    assert policy.version == 1 and metrics["tokens"] == sum(len(s) for s in b.input_ids)
    assert "max_memory_allocated_gb" not in metrics  # a CUDA learner's number only: absent on the CPU


def test_several_updates_per_batch_use_the_old_policy():
    algorithm = AlgorithmConfig(ppo_epochs=2, mini_batches=2, clip_eps_low=0.2, clip_eps_high=0.2)
    policy = make_policy(lr=5e-2, algorithm=algorithm)
    metrics = policy.train_step(batch())
    assert metrics["optimizer_steps"] == 4 and policy.optimizer_steps == 4
    # later updates see a policy that moved away from the one that scored the batch
    assert metrics["kl_old"] > 0 and metrics["ratio_max"] > 1.0


def test_reference_is_the_base_with_the_adapter_disabled():
    algorithm = AlgorithmConfig(kl_coef=0.1, kl_estimator="k3")
    policy, b = make_policy(lr=5e-2, algorithm=algorithm), batch()
    frozen = tiny_llama(vocab_size=VOCAB).eval()  # the same seed: the base weights before training
    first = policy.train_step(b)
    assert first["kl_ref"] == pytest.approx(0.0, abs=1e-7)  # B = 0 at init: policy == reference
    for _ in range(3):
        metrics = policy.train_step(b)
    assert metrics["kl_ref"] > 1e-5 and "kl_loss" in metrics
    with policy.model.disable_adapter():
        ref = policy.logprobs(b.input_ids[:1], b.prompt_lengths[:1])[0]
    assert torch.allclose(torch.tensor(ref), reference_logprobs(frozen, b.input_ids[0], 5), atol=1e-5)


def test_rollout_logprobs_feed_tis_and_the_metrics():
    policy, b = make_policy(algorithm=AlgorithmConfig(tis_cap=2.0)), batch(n=4)
    trainer = policy.logprobs(b.input_ids, b.prompt_lengths)
    rollout = [[x - 0.1 for x in lp] for lp in trainer[:3]] + [None]  # the engine is 0.1 nat more certain
    metrics = policy.train_step(batch(n=4, rollout=rollout))
    assert metrics["rollout_logprob_diff_mean"] == pytest.approx(0.1, abs=1e-4)
    assert metrics["tis_ratio_mean"] == pytest.approx(torch.exp(torch.tensor(0.1)).item(), rel=1e-4)
    assert metrics["tis_clip_frac"] == 0.0


def _adapter(policy):
    return {k: v.detach().clone() for k, v in policy.model.named_parameters() if v.requires_grad}


def test_old_logprobs_from_the_rollout_give_the_recomputed_update_when_engine_and_trainer_agree():
    def run(old_logprobs, shift=0.0):
        algorithm = AlgorithmConfig(mini_batches=2, old_logprobs=old_logprobs)
        policy = make_policy(lr=5e-2, algorithm=algorithm)
        b = batch()
        rollout = [[x + shift for x in lp] for lp in policy.logprobs(b.input_ids, b.prompt_lengths)]
        metrics = policy.train_step(batch(rollout=rollout))
        return _adapter(policy), metrics

    recomputed, _ = run("recompute")
    from_rollout, metrics = run("rollout")
    assert metrics["optimizer_steps"] == 2 and metrics["kl_old"] > 0  # the second update saw a moved policy
    for name, value in recomputed.items():
        assert torch.allclose(value, from_rollout[name], atol=1e-6), name
    assert metrics["rollout_logprob_diff_max"] < 1e-5  # measured before the first update
    _, shifted = run("rollout", shift=-0.05)  # an engine 0.05 nat less certain than the trainer
    assert shifted["rollout_logprob_diff_mean"] == pytest.approx(0.05, abs=1e-4)
    assert "tis_ratio_mean" not in shifted  # π_old is the sampler itself: no IS weight to apply


def test_old_logprobs_from_the_rollout_need_them_on_every_row():
    policy = make_policy(algorithm=AlgorithmConfig(mini_batches=2, old_logprobs="rollout"))
    with pytest.raises(ValueError, match="old_logprobs=recompute"):
        policy.train_step(batch())  # rows without engine logprobs
    with pytest.raises(ValueError, match="no critic"):
        AlgorithmConfig(advantage="gae", old_logprobs="rollout")
    with pytest.raises(ValueError, match="recompute or rollout"):
        AlgorithmConfig(old_logprobs="engine")


def test_lora_parameters_stay_float32_over_a_bf16_base():
    policy = make_policy(dtype="bfloat16")
    assert all(p.dtype == torch.float32 for p in policy.trainable_state().values())
    assert policy.causal_lm.model.embed_tokens.weight.dtype == torch.bfloat16
    assert torch.isfinite(torch.tensor(policy.train_step(batch())["grad_norm"]))


def test_sft_step_lowers_cross_entropy():
    policy = make_policy(lr=2e-2)
    ids, plens = rows(4)
    losses = [policy.sft_step(ids, plens)["loss"] for _ in range(5)]
    assert losses[-1] < losses[0] - 0.05


def test_lr_schedule_values():
    cos = OptimizerSettings(lr=1.0, schedule="cosine", warmup_steps=2, total_steps=6, min_lr_ratio=0.1)
    # warm-up 1/2, 2/2; cosine from 1 at step 2 to 0.1 at step 6; flat after
    assert [lr_factor(s, cos) for s in (0, 1, 2, 4, 6, 9)] == pytest.approx([0.5, 1.0, 1.0, 0.55, 0.1, 0.1])
    const = OptimizerSettings(lr=1.0, warmup_steps=4)
    assert [lr_factor(s, const) for s in (0, 3, 10)] == pytest.approx([0.25, 1.0, 1.0])
    with pytest.raises(ValueError, match="total_steps"):
        OptimizerSettings(schedule="cosine")


def test_bad_input_is_refused_early(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        Policy(PolicyConfig(model=str(tmp_path / "nope"), device="cpu"), AlgorithmConfig())
    with pytest.raises(ValueError, match="loss_max_tokens"):
        make_policy(algorithm=AlgorithmConfig.from_mapping({"name": "dr_grpo"}))
    policy = make_policy()
    with pytest.raises(ValueError, match="prompt length 0"):
        policy.train_step(TrainBatch([[1, 2]], [0], [1.0], [None], ["g"], 0))
    with pytest.raises(ValueError, match="3 rollout logprobs for 2 completion tokens"):
        policy.train_step(TrainBatch([[1, 2, 3]], [1], [1.0], [[-1.0] * 3], ["g"], 0))
    with pytest.raises(ValueError, match="unknown policy settings"):
        PolicyConfig.from_mapping({"model": "x", "lora_rank": 8})
    with pytest.raises(ValueError, match="unknown lora settings"):
        PolicyConfig.from_mapping({"lora": {"rank": 8}})


# ------------------------------------------------------------------------------------------- export
def test_merged_export_is_base_plus_scaled_BA(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    policy, b = make_policy(lr=5e-2, lora=LoraSettings(r=4, alpha=8, target_modules=("q_proj", "down_proj"))), batch()
    for _ in range(2):
        policy.train_step(b)
    update = policy.export_weights("merged", str(tmp_path / "merged"))
    assert update.version == 2 and update.kind == "merged" and update.seconds > 0
    merged = load_file(tmp_path / "merged" / "model.safetensors")
    base = tiny_llama(vocab_size=VOCAB).state_dict()
    q = policy.causal_lm.model.layers[1].self_attn.q_proj
    delta = (8 / 4) * q.lora_B["default"].weight @ q.lora_A["default"].weight
    assert delta.abs().max() > 1e-4  # training moved the adapter
    expected = base["model.layers.1.self_attn.q_proj.weight"] + delta
    assert torch.allclose(merged["model.layers.1.self_attn.q_proj.weight"], expected, atol=1e-6)
    assert torch.equal(merged["model.layers.1.self_attn.k_proj.weight"], base["model.layers.1.self_attn.k_proj.weight"])
    assert not any("lora" in k or "base_layer" in k for k in merged)
    # the directory loads as a plain model and scores like the policy
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    expected_lp = torch.tensor(policy.logprobs(b.input_ids[:1], b.prompt_lengths[:1])[0])
    assert torch.allclose(reference_logprobs(loaded, b.input_ids[0], 5), expected_lp, atol=1e-5)
    assert loaded.config.use_cache is True


def test_tied_embeddings_are_exported_once(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    cfg = PolicyConfig(device="cpu", lora=LoraSettings(r=4, alpha=8), optimizer=OptimizerSettings(lr=5e-2))
    policy = Policy(cfg, AlgorithmConfig(), model=tiny_llama(vocab_size=VOCAB, tie_word_embeddings=True))
    b = batch()
    policy.train_step(b)
    policy.export_weights("merged", str(tmp_path / "tied"))
    assert "lm_head.weight" not in load_file(tmp_path / "tied" / "model.safetensors")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "tied").eval()
    expected = torch.tensor(policy.logprobs(b.input_ids[:1], b.prompt_lengths[:1])[0])
    assert torch.allclose(reference_logprobs(loaded, b.input_ids[0], 5), expected, atol=1e-5)


def test_lora_export_loads_with_peft(tmp_path):
    from peft import PeftModel

    policy, b = make_policy(lr=5e-2), batch()
    policy.train_step(b)
    policy.export_weights("lora", str(tmp_path / "adapter"))
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    loaded = PeftModel.from_pretrained(tiny_llama(vocab_size=VOCAB), tmp_path / "adapter").eval()
    expected = torch.tensor(policy.logprobs(b.input_ids[:1], b.prompt_lengths[:1])[0])
    assert torch.allclose(reference_logprobs(loaded, b.input_ids[0], 5), expected, atol=1e-5)


def test_full_finetune_trains_and_exports_all_weights(tmp_path):
    from safetensors.torch import load_file

    policy = make_policy(lr=1e-3, finetune="full", algorithm=AlgorithmConfig(kl_coef=0.05))
    policy.train_step(batch())
    assert policy.reference is not None and not any(p.requires_grad for p in policy.reference.parameters())
    policy.export_weights("merged", str(tmp_path / "full"))
    merged = load_file(tmp_path / "full" / "model.safetensors")
    assert torch.equal(merged["model.layers.0.mlp.up_proj.weight"], policy.model.model.layers[0].mlp.up_proj.weight)
    with pytest.raises(ValueError, match="finetune=lora"):
        policy.export_weights("lora", str(tmp_path / "x"))


# --------------------------------------------------------------------------------------- checkpoints
def _dropout_policy():
    # LoRA dropout draws random numbers in every step: resuming must restore the RNG too.
    return make_policy(lora=LoraSettings(r=4, alpha=8, dropout=0.1), algorithm=AlgorithmConfig(mini_batches=2))


def test_resume_is_bit_for_bit(tmp_path):
    b1, b2, b3 = batch(seed=1), batch(seed=2), batch(seed=3)
    first = _dropout_policy()
    first.train_step(b1)
    first.train_step(b2)
    first.save_checkpoint(str(tmp_path / "ckpt"), extra={"data_position": 17})
    continued = first.train_step(b3)

    resumed = _dropout_policy()
    assert resumed.load_checkpoint(str(tmp_path / "ckpt")) == {"data_position": 17}
    assert resumed.version == 2 and resumed.optimizer_steps == 4
    again = resumed.train_step(b3)
    for (name, p), q in zip(first.trainable_state().items(), resumed.trainable_state().values()):
        assert torch.equal(p, q), name
    assert again["loss"] == continued["loss"] and again["grad_norm"] == continued["grad_norm"]


def test_a_crash_while_saving_leaves_the_last_checkpoint(tmp_path, monkeypatch):
    import rl.learner.checkpoint as ckpt

    policy, path = make_policy(), str(tmp_path / "ckpt")
    policy.train_step(batch())
    policy.save_checkpoint(path, extra={"step": 1})
    policy.train_step(batch())

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        policy.save_checkpoint(path, extra={"step": 2})
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == [".ckpt." + os.readlink(path).split(".")[-1], "ckpt"]
    fresh = make_policy()
    assert fresh.load_checkpoint(path) == {"step": 1} and fresh.version == 1
    # a second save replaces the first and removes its directory
    policy.save_checkpoint(path, extra={"step": 2})
    assert len(os.listdir(tmp_path)) == 2 and make_policy().load_checkpoint(path) == {"step": 2}


def test_checkpoint_refusals(tmp_path):
    policy = make_policy()
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not a checkpoint link"):
        policy.save_checkpoint(str(tmp_path / "plain"))
    with pytest.raises(ValueError, match="JSON"):
        policy.save_checkpoint(str(tmp_path / "c"), extra={"x": object()})
    with pytest.raises(FileNotFoundError, match="not a learner checkpoint"):
        policy.load_checkpoint(str(tmp_path / "plain"))
    policy.save_checkpoint(str(tmp_path / "c"))
    other = make_policy(lora=LoraSettings(r=4, alpha=8, target_modules=("q_proj",)))
    with pytest.raises(ValueError, match="does not fit this policy"):
        other.load_checkpoint(str(tmp_path / "c"))
