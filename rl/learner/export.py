"""Export the policy in the formats vLLM loads: a peft adapter directory, or a full HF model directory
with the adapter merged (safetensors, config, tokenizer files).

The merge is computed out of place (W + scale * B @ A in float32, cast back) so the live policy is
never touched: merging into the weights and unmerging afterwards would drift a bf16 base by rounding.
"""

from __future__ import annotations

import copy
import os
import shutil
from typing import Literal

import torch

# Files of a model directory that describe the tokenizer and chat template (copied into merged exports).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
)


def merged_state_dict(model: torch.nn.Module, lora: bool) -> dict[str, torch.Tensor]:
    """The full model's weights under the plain transformers names, adapter merged, on the CPU.

    Tensors that share storage (tied embeddings) appear once, under the first name, as save_pretrained does.
    """
    if not lora:
        return _dedupe(model.state_dict())
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    merged: dict[str, torch.Tensor] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer) and module.active_adapters:
            layer = module.get_base_layer()
            weight = layer.weight.detach().float()
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    weight = weight + module.get_delta_weight(adapter).detach().float()
            merged[f"{name}.weight"] = weight.to(layer.weight.dtype)
    state = {}
    for key, value in base.state_dict().items():
        if "lora_" in key:
            continue
        clean = key.replace(".base_layer.", ".")
        state[clean] = merged.get(clean, value)
    return _dedupe(state)


def _dedupe(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    seen: set[tuple] = set()
    out = {}
    for key, value in state.items():
        # the same memory under two names (tied embeddings), not merely two views into one storage
        ident = (
            (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape), value.dtype)
            if value.numel()
            else (id(value),)
        )
        if ident in seen:
            continue
        seen.add(ident)
        out[key] = value.detach().to("cpu").contiguous()
    return out


def export_weights(
    model: torch.nn.Module, kind: Literal["lora", "merged"], path: str, *, lora: bool, source_dir: str | None
) -> None:
    """Write the policy to directory `path` (created; files of the same names are overwritten)."""
    if kind not in ("lora", "merged"):
        raise ValueError(f"export kind must be lora or merged, not {kind!r}")
    os.makedirs(path, exist_ok=True)
    if kind == "lora":
        if not lora:
            raise ValueError("export kind lora needs policy.finetune=lora (this policy trains all weights)")
        model.save_pretrained(path)
        return
    causal_lm = model.get_base_model() if lora else model
    write_merged(merged_state_dict(model, lora), causal_lm, path, source_dir)


ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def write_adapter(model: torch.nn.Module, path: str, base_model: str) -> None:
    """The LoRA adapter of peft model `model` in peft's own format (what `PeftModel.from_pretrained(base, path)`
    and vLLM's LoRA loader read): adapter_model.safetensors (peft's state dict, adapter name stripped) and
    adapter_config.json, whose base_model_name_or_path is `base_model` (a portable reference, not this
    machine's path). No README or other files: `path` may be a checkpoint directory."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    adapter = get_peft_model_state_dict(model, save_embedding_layers=False)
    state = {k: v.detach().to("cpu").contiguous() for k, v in adapter.items()}
    save_file(state, os.path.join(path, ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config = copy.deepcopy(model.peft_config[model.active_adapter])
    config.base_model_name_or_path = base_model
    config.inference_mode = True
    config.save_pretrained(path)


def write_merged(state: dict[str, torch.Tensor], causal_lm: torch.nn.Module, path: str, source_dir: str | None) -> None:
    """A full HF model directory vLLM and transformers load: model.safetensors, config, tokenizer files."""
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    save_file(state, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    config = copy.deepcopy(causal_lm.config)
    config.use_cache = True  # the learner turns the KV cache off for training; servers want it on
    config.save_pretrained(path)
    if getattr(causal_lm, "generation_config", None) is not None:
        causal_lm.generation_config.save_pretrained(path)
    if source_dir:
        for name in TOKENIZER_FILES:
            src = os.path.join(source_dir, name)
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(path, name))
