"""Learner checkpoints as Hugging Face directories, on a tiny random Llama saved in a temporary model cache:
a LoRA checkpoint is a peft adapter (PeftModel.from_pretrained loads it), names its base model portably, and
scripts/export_checkpoint.py writes it merged or as an adapter; every load is checked against the learner's
own logits (and against the base's, so an adapter that did nothing would fail)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

pytest.importorskip("peft")

from rl.loop_checkpoints import LoopState, save_checkpoint  # noqa: E402
from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import byte_tokenizer, tiny_llama  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

VOCAB = 259  # byte_tokenizer's
INPUT = torch.tensor([[1, 5, 9, 200, 17, 42, 3, 77, 128, 250, 11, 64]])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A model cache holding `tiny-base` (what rl.models would hold for a cached or warm-started model)."""
    root = tmp_path / "models"
    base = root / "tiny-base"
    tiny_llama(seed=3, vocab_size=VOCAB).save_pretrained(base)
    byte_tokenizer().save_pretrained(base)
    monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(root))
    return root


def trained_policy(base_dir, finetune="lora"):
    cfg = PolicyConfig(
        model=str(base_dir),
        finetune=finetune,
        lora=LoraSettings(r=4, alpha=8),
        device="cpu",
        optimizer=OptimizerSettings(lr=5e-2),
    )
    policy = Policy(cfg, AlgorithmConfig())
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(0, VOCAB, (14,), generator=g).tolist() for _ in range(4)]
    for _ in range(3):  # LoRA's B starts at zero: train it away from the base
        policy.sft_step(ids, [6] * 4)
    return policy


def logits(model):
    model.eval()
    with torch.no_grad():
        return model(INPUT).logits.float()


def checkpoint(policy, run_dir, step=3):
    state = LoopState(step=step, policy_version=policy.version, sampler={}, rng=[], run_dir=str(run_dir))
    return save_checkpoint(run_dir / "checkpoints", state, policy.save_checkpoint)


def export(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_checkpoint.py"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def base_model(cache):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(cache / "tiny-base", dtype=torch.float32)


def test_a_lora_checkpoint_is_a_peft_adapter_and_exports_merged_and_as_an_adapter(cache, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    policy = trained_policy(cache / "tiny-base")
    expected = logits(policy.model)
    base_logits = logits(base_model(cache))
    assert (expected - base_logits).abs().max() > 1e-2  # the adapter changes the model
    step = checkpoint(policy, tmp_path / "run")

    learner = step / "learner"
    meta = json.loads((learner / "meta.json").read_text())
    assert meta["model"] == "tiny-base" and str(tmp_path) not in (learner / "meta.json").read_text()
    assert meta["lora"]["r"] == 4 and meta["lora"]["alpha"] == 8
    adapter_config = json.loads((learner / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "tiny-base" and adapter_config["r"] == 4
    loaded = PeftModel.from_pretrained(base_model(cache), str(learner))
    torch.testing.assert_close(logits(loaded), expected, atol=1e-5, rtol=1e-5)

    merged = tmp_path / "merged"
    result = export(tmp_path / "run", "--out", merged, "--merged")  # the run directory: its `latest`
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["base_model"] == str((cache / "tiny-base").resolve())
    assert (merged / "tokenizer.json").is_file() and not list(merged.glob("adapter_*"))
    torch.testing.assert_close(
        logits(AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)), expected, atol=1e-5, rtol=1e-5
    )

    from scripts_export import main  # the same script, in this process

    adapter = tmp_path / "adapter"
    assert main([str(step), "--out", str(adapter), "--adapter"]) == 0
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(
        (cache / "tiny-base").resolve()
    )
    torch.testing.assert_close(
        logits(PeftModel.from_pretrained(base_model(cache), str(adapter))), expected, atol=1e-5, rtol=1e-5
    )
    assert main([str(step), "--out", str(adapter), "--adapter"]) == 2  # not over an existing export


@pytest.fixture
def scripts_export(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("scripts_export", ROOT / "scripts" / "export_checkpoint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "scripts_export", module)
    return module


@pytest.fixture(autouse=True)
def _script_module(scripts_export):
    yield


def test_a_checkpoint_moved_to_another_machine_finds_its_base_in_that_machine_s_cache(cache, tmp_path, monkeypatch):
    from scripts_export import main

    policy = trained_policy(cache / "tiny-base")
    expected = logits(policy.model)
    checkpoint(policy, tmp_path / "run")
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(tmp_path / "run", moved, symlinks=True)
    shutil.rmtree(tmp_path / "run")

    empty = tmp_path / "other-cache"
    monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(empty))
    result = export(moved, "--out", tmp_path / "x", env={"KERNELRL_MODEL_CACHE": str(empty)})
    assert result.returncode == 2
    assert "'tiny-base' is not in this machine's model cache" in result.stderr and str(empty) in result.stderr
    assert "KERNELRL_MODEL_CACHE" in result.stderr and not (tmp_path / "x").exists()

    shutil.copytree(cache / "tiny-base", empty / "tiny-base")
    shutil.rmtree(cache)
    assert main([str(moved), "--out", str(tmp_path / "x")]) == 0
    from transformers import AutoModelForCausalLM

    torch.testing.assert_close(
        logits(AutoModelForCausalLM.from_pretrained(tmp_path / "x", dtype=torch.float32)),
        expected,
        atol=1e-5,
        rtol=1e-5,
    )


def test_an_older_checkpoint_without_adapter_files_still_resumes_and_exports(cache, tmp_path):
    """Written before this change: meta.json names the base by an absolute path into (another machine's) model
    cache and has no LoRA settings; no adapter files. The run's .hydra/config.yaml has the LoRA settings."""
    from scripts_export import main
    from transformers import AutoModelForCausalLM

    policy = trained_policy(cache / "tiny-base")
    expected = logits(policy.model)
    step = checkpoint(policy, tmp_path / "run")
    learner = step / "learner"
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (learner / name).unlink()
    meta = json.loads((learner / "meta.json").read_text())
    for key in ("lora", "dtype"):
        del meta[key]
    meta["model"] = "/home/someone/.cache/kernelrl/models/tiny-base"
    (learner / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "run" / ".hydra").mkdir()
    (tmp_path / "run" / ".hydra" / "config.yaml").write_text(
        "policy:\n  learner:\n    finetune: lora\n    lora:\n      r: 4\n      alpha: 8\n"
    )

    fresh = Policy(policy.config, AlgorithmConfig())
    fresh.load_checkpoint(str(learner))  # resume reads it as before
    torch.testing.assert_close(logits(fresh.model), expected)
    assert main([str(step), "--out", str(tmp_path / "merged")]) == 0
    torch.testing.assert_close(
        logits(AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)),
        expected,
        atol=1e-5,
        rtol=1e-5,
    )


def test_a_sharded_learner_s_dcp_checkpoint_exports_too(cache, tmp_path):
    from rl.learner import sharded_checkpoint
    from scripts_export import main
    from transformers import AutoModelForCausalLM

    policy = trained_policy(cache / "tiny-base")
    expected = logits(policy.model)
    sharded_checkpoint.save(policy, str(tmp_path / "learner"), {})  # one process: the format a group writes
    assert json.loads((tmp_path / "learner" / "meta.json").read_text())["format"] == "dcp"
    assert main([str(tmp_path / "learner"), "--out", str(tmp_path / "merged")]) == 0
    torch.testing.assert_close(
        logits(AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)),
        expected,
        atol=1e-5,
        rtol=1e-5,
    )


def test_a_full_fine_tune_exports_merged_only(cache, tmp_path):
    from scripts_export import main
    from transformers import AutoModelForCausalLM

    policy = trained_policy(cache / "tiny-base", finetune="full")
    expected = logits(policy.model)
    assert (expected - logits(base_model(cache))).abs().max() > 1e-2
    step = checkpoint(policy, tmp_path / "run")
    assert not (step / "learner" / "adapter_config.json").exists()
    assert main([str(step), "--out", str(tmp_path / "merged")]) == 0
    torch.testing.assert_close(
        logits(AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)),
        expected,
        atol=1e-5,
        rtol=1e-5,
    )
    assert main([str(step), "--out", str(tmp_path / "adapter"), "--adapter"]) == 2


def test_base_model_references():
    from rl.models import ModelSpecError, cache_root, model_reference, resolve_model_reference

    name = "smollm2-135m-instruct-warmstart-abc"
    assert model_reference(cache_root() / name) == name
    assert (
        model_reference("/hf/hub/models--Qwen--Qwen2.5-Coder-7B-Instruct/snapshots/0123abc")
        == "Qwen/Qwen2.5-Coder-7B-Instruct"
    )
    assert model_reference("/models/mine") == "/models/mine"
    with pytest.raises(ModelSpecError, match="records no base model"):
        resolve_model_reference("")
    with pytest.raises(ModelSpecError, match="does not exist on this machine"):
        resolve_model_reference("/models/not-here")
