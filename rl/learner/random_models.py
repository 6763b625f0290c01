"""Randomly initialised models of real architectures, in memory: tiny ones for tests, rl.models' presets for benchmarks.

No weights are downloaded: the configuration is written here and the weights drawn from a seed.
"""

from __future__ import annotations

import torch

SMOLLM2_VOCAB = 49152  # rl.models' random presets use SmolLM2's tokenizer


def random_causal_lm(arch: str = "llama", seed: int = 0, **shape):
    """A transformers causal LM of `arch` (llama | qwen2) with random weights; `shape` sets config fields."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}
    if arch not in classes:
        raise ValueError(f"arch must be one of {sorted(classes)}, not {arch!r}")
    config_cls, model_cls = classes[arch]
    torch.manual_seed(seed)
    return model_cls(config_cls(**shape))


def from_preset(name: str, vocab_size: int = SMOLLM2_VOCAB, seed: int = 0):
    """The in-memory model of an rl.models random preset (e.g. "llama-0.5b"): the same shapes, no tokenizer
    needed, nothing written to disk (the GPU benchmark builds it where SmolLM2's GGUF is not installed)."""
    import dataclasses

    from rl.models import RANDOM_PRESETS

    if name not in RANDOM_PRESETS:
        raise ValueError(f"unknown random preset {name!r}; known: {sorted(RANDOM_PRESETS)}")
    shape = dataclasses.asdict(RANDOM_PRESETS[name])
    arch = shape.pop("model_type")
    return random_causal_lm(arch, seed=seed, vocab_size=vocab_size, **shape)


def tiny_llama(seed: int = 0, vocab_size: int = 128, **overrides):
    """2 layers, hidden 64: a GRPO step on a few hundred tokens takes a few hundredths of a second on a CPU."""
    shape = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    shape.update(overrides)
    return random_causal_lm("llama", seed=seed, **shape)


CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokenizer():
    """A byte-level tokenizer with no merges (256 byte tokens + 3 ChatML specials = 259) and a ChatML
    chat template: real tokenization of any text for tiny test models, with nothing downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer
