"""Helpers shared by the rollout engine tests: the trainer-side recomputation of the sampled tokens' logprobs
(transformers forward, float32); synthetic adapters come from rl.rollout.random_adapters."""

from __future__ import annotations

import torch


def recompute_logprobs(model, sample, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) of each completion token given everything before it (one forward, float32)."""
    ids = torch.tensor([sample.prompt_ids + sample.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(sample.prompt_ids) - 1 : -1].float() / temperature
    return logits.log_softmax(-1).gather(-1, torch.tensor(sample.completion_ids)[:, None])[:, 0]
