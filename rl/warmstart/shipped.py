"""The shipped warm-start adapter at run time: is it this recipe's, and merging it (no other rl imports, so that
rl.warmstart.stage can use it; building and checking it: rl.warmstart.artifact)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

__all__ = [
    "ADAPTER_DIR",
    "MANIFEST",
    "REBUILD",
    "WEIGHTS",
    "merge_adapter",
    "read_manifest",
    "sha256",
    "shipped_adapter",
]

log = logging.getLogger("kernelrl.warmstart")
ADAPTER_DIR = Path(__file__).resolve().parent / "adapter"
MANIFEST = "manifest.json"
WEIGHTS = "adapter_model.safetensors"
REBUILD = "python -m rl.warmstart.artifact build"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(adapter_dir: Path = ADAPTER_DIR) -> dict[str, Any] | None:
    path = adapter_dir / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def shipped_adapter(recipe: str, adapter_dir: Path = ADAPTER_DIR) -> Path | None:
    """The shipped adapter's directory when it was built from recipe fingerprint `recipe` and its weights are the
    ones the manifest names; None (with a warning saying why and how to rebuild) otherwise."""
    manifest = read_manifest(adapter_dir)
    if manifest is None:
        return None
    if manifest.get("fingerprint") != recipe:
        log.warning(
            "warm start: the shipped adapter was built for recipe %s, this run's is %s (prompts, synthetic "
            "pairs or settings changed): building it here instead; `%s` rebuilds the shipped one",
            manifest.get("fingerprint"),
            recipe,
            REBUILD,
        )
        return None
    weights = adapter_dir / WEIGHTS
    if not weights.is_file() or sha256(weights) != manifest.get("sha256"):
        log.error(
            "warm start: %s does not match its manifest's sha256; not using it (`%s` rebuilds it)", weights, REBUILD
        )
        return None
    return adapter_dir


def merge_adapter(base_dir: Path, adapter_dir: Path, out: Path) -> None:
    """base + adapter, merged in float32, saved as a complete HF directory (weights, config, tokenizer)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapter_dir, torch_device="cpu")  # float16 adapter -> float32 layers
    merged = model.merge_and_unload()
    merged.config.use_cache = True
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out)
