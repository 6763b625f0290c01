"""Randomly initialised models of real architectures: tiny ones for tests, ~0.5B ones for benchmarks.

No weights are downloaded: the configuration is written here and the weights drawn from a seed.
"""

from __future__ import annotations

import torch

# Shapes of Qwen2.5-0.5B (hidden 896, 24 layers, GQA 14/2 heads, 151936 vocab, tied embeddings): ~494M params.
QWEN2_0_5B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6,
                  max_position_embeddings=32768)
# Llama-shaped ~0.5B (hidden 1024, 24 layers, 32000 vocab, untied).
LLAMA_0_5B = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=24, num_attention_heads=16,
                  num_key_value_heads=8, vocab_size=32000, tie_word_embeddings=False, max_position_embeddings=8192)


def random_causal_lm(arch: str = "llama", seed: int = 0, **shape):
    """A transformers causal LM of `arch` (llama | qwen2) with random weights; `shape` sets config fields."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}
    if arch not in classes:
        raise ValueError(f"arch must be one of {sorted(classes)}, not {arch!r}")
    config_cls, model_cls = classes[arch]
    torch.manual_seed(seed)
    return model_cls(config_cls(**shape))


def tiny_llama(seed: int = 0, vocab_size: int = 128, **overrides):
    """2 layers, hidden 64: a GRPO step on a few hundred tokens takes a few hundredths of a second on a CPU."""
    shape = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    shape.update(overrides)
    return random_causal_lm("llama", seed=seed, **shape)
