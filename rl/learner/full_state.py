"""The serving weights of a (possibly FSDP2-sharded) policy: full tensors under the plain transformers names,
a LoRA adapter merged in by name (W + (alpha / r) B A in float32), the value head left out.

Used by the sharded learner's exports and weight broadcasts (rl.learner.sharded); the single-process Policy
merges through peft's modules instead (rl.learner.export.merged_state_dict), with the same result.
"""

from __future__ import annotations

import torch

_PEFT_PREFIX = "base_model.model."
_ADAPTER = "default"  # the adapter name get_peft_model gives


def merge_lora_by_name(state: dict[str, torch.Tensor], scaling: float) -> dict[str, torch.Tensor]:
    """peft's state dict (base_layer, lora_A, lora_B entries) -> plain transformers names, adapters merged."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if ".lora_A." in key or ".lora_B." in key or ".lora_dropout." in key:
            continue
        name = key[len(_PEFT_PREFIX) :] if key.startswith(_PEFT_PREFIX) else key
        if ".base_layer." in key:
            prefix, _, param = key.rpartition(".base_layer.")
            name = name.replace(".base_layer.", ".")
            a, b = state.get(f"{prefix}.lora_A.{_ADAPTER}.{param}"), state.get(f"{prefix}.lora_B.{_ADAPTER}.{param}")
            if param == "weight" and a is not None and b is not None:
                value = (value.float() + scaling * (b.float() @ a.float())).to(value.dtype)
        out[name] = value
    return out


def serving_state_dict(
    net: torch.nn.Module, config, *, cpu: bool, rank0_only: bool, is_rank0: bool
) -> dict[str, torch.Tensor] | None:
    """Gather the full weights of rl.learner.logprobs.PolicyNet `net` (a collective under FSDP2: every rank
    calls it). cpu: on the host; rank0_only (with cpu): the other ranks get None and hold no copy."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=cpu and rank0_only))
    if rank0_only and not is_rank0:
        return None
    state = {k[len("model.") :]: v for k, v in state.items() if k.startswith("model.")}  # not value_head.*
    if config.finetune == "lora":
        state = merge_lora_by_name(state, config.lora.alpha / config.lora.r)
    if getattr(net.causal_lm.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # the same tensor as the embeddings; loaders tie it again
    # bf16 mixed precision keeps float32 masters; engines serve the compute dtype, and half the bytes travel
    dtype = torch.bfloat16 if getattr(config, "dtype", "float32") == "bfloat16" else None
    state = {
        k: v.detach().to(device="cpu" if cpu else v.device, dtype=dtype if v.is_floating_point() else None).contiguous()
        for k, v in state.items()
    }
    return state
