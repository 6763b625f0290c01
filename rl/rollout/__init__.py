"""Rollout engines: implementations of rl.types.RolloutEngine, and `make_engine`, which the loop calls.

vllm    vLLM's AsyncLLM in Ray actors (rl.rollout.vllm_engine, rl.rollout.actor)
hf      transformers models in Ray actors (rl.rollout.hf_engine): an own decode loop over a static KV cache,
        compiled on a GPU (engine.hf_decode), or `generate`; for GPUs without vLLM
openai  an OpenAI-compatible endpoint, in the driver (rl.rollout.openai_engine)
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from rl.rollout.config import ENGINE_KINDS, EngineConfig
from rl.types import RolloutEngine

__all__ = ["ENGINE_KINDS", "EngineConfig", "make_engine"]


def make_engine(
    engine: Mapping[str, Any],
    model: str,
    *,
    sync: Literal["lora", "merged", "broadcast"] = "merged",
    chat_template: str | None = None,
    seed: int | None = None,
) -> RolloutEngine:
    """The engine `engine["kind"]` selects, serving `model`.

    engine: the `policy.engine` mapping (its other keys are EngineConfig's fields, or OpenAIEngineConfig's)
    model: an rl.models spec (vllm, hf) or the served model name (openai, unless the mapping names one)
    sync: how the learner's weights arrive after each step; vLLM starts with LoRA support only for "lora"
    """
    m = dict(engine)
    kind = m.get("kind")
    if kind not in ENGINE_KINDS:
        raise ValueError(f"engine kind must be one of {ENGINE_KINDS}, not {kind!r}")
    if kind == "openai":
        from rl.rollout.openai_config import OpenAIEngineConfig
        from rl.rollout.openai_engine import OpenAIEngine

        m.pop("kind")
        m.setdefault("model", model)
        return OpenAIEngine(OpenAIEngineConfig.from_mapping(m), seed=seed)
    if sync not in ("lora", "merged", "broadcast"):
        raise ValueError(f"weight sync must be lora, merged or broadcast, not {sync!r}")
    config = EngineConfig.from_mapping(m)  # unknown keys refused before the model is built
    from rl.models import resolve_model
    from rl.rollout.actor import RayRolloutEngine

    return RayRolloutEngine(
        kind, resolve_model(model), config, enable_lora=(kind == "vllm" and sync == "lora"), chat_template=chat_template
    )
