"""Synthetic peft adapters for tests and benchmarks: LoRA with random B (peft starts B at zero, which changes
nothing), and the same adapter merged into a full HF directory (what the learner's `merged` export writes)."""

from __future__ import annotations

from pathlib import Path

import torch


def make_adapter(model_dir: str | Path, out: str | Path, *, seed: int, scale: float, r: int = 8) -> Path:
    """A peft LoRA adapter whose B matrices are random (peft starts them at zero: no change), so that the
    adapted model clearly differs from the base; scale=0 gives an adapter equal to the base model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    lora = LoraConfig(r=r, lora_alpha=2 * r, target_modules=["q_proj", "v_proj", "down_proj"])
    peft_model = get_peft_model(model, lora)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * scale)
    peft_model.save_pretrained(str(out))
    return Path(out)


def make_merged(model_dir: str | Path, adapter: str | Path, out: str | Path) -> Path:
    """The adapter merged into a full HF directory (what the learner's `merged` export writes)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out))
    return Path(out)
