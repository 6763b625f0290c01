"""A training checkpoint's policy as a Hugging Face directory: the merged full model (transformers and vLLM load it)
or the LoRA adapter in peft's format (vLLM serves it as a LoRA over the base model).

    export_checkpoint("outputs/RUN/checkpoints/step_000010", "exported", kind="merged")

The model is rebuilt from the checkpoint alone: the base model named in its meta.json (resolved on this machine by
rl.models.resolve_model_reference: the model cache, a Hub snapshot, or a path; a clear error when it is not here),
then the trained weights: the checkpoint's peft adapter files, or its `trainable.safetensors` (full fine-tunes,
and LoRA checkpoints written before the adapter files existed), or its DCP shards (a sharded learner's). Only the
weights are read, never the optimizer state. The merge is the learner's own (rl.learner.export).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

import torch

from rl.learner.export import ADAPTER_CONFIG, ADAPTER_WEIGHTS, export_weights, write_adapter

__all__ = ["CheckpointModel", "export_checkpoint", "learner_dir", "load_checkpoint_model"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclasses.dataclass
class CheckpointModel:
    model: torch.nn.Module  # a peft model (LoRA) or a transformers causal LM (full fine-tune)
    lora: bool
    base_dir: Path  # where the base model was found on this machine
    meta: dict[str, Any]
    path: Path  # the learner directory read


def learner_dir(checkpoint: str | os.PathLike[str]) -> Path:
    """The learner directory of `checkpoint`: a learner directory itself (it holds meta.json), a step directory,
    a run's checkpoints/ or a run directory (the latter two: the checkpoint `latest` names)."""
    p = Path(checkpoint).expanduser()
    if (p / "meta.json").is_file():
        return p
    from rl.loop_checkpoints import find_checkpoint

    directory, _ = find_checkpoint(p)
    return directory / "learner"


def _lora_settings(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    """r, alpha, dropout, target_modules: from meta.json, or (older checkpoints) from the run's .hydra/config.yaml."""
    if meta.get("lora"):
        return dict(meta["lora"])
    from omegaconf import OmegaConf

    from rl.learner.config import LoraSettings

    for run_dir in list(path.resolve().parents)[:4]:
        config = run_dir / ".hydra" / "config.yaml"
        if config.is_file():
            learner = OmegaConf.to_container(OmegaConf.load(config)).get("policy", {}).get("learner") or {}
            return dataclasses.asdict(LoraSettings.from_mapping(learner.get("lora") or {}))
    raise ValueError(
        f"{path}: a LoRA checkpoint without adapter_config.json, LoRA settings in meta.json or its "
        "run's .hydra/config.yaml: its rank and alpha are unknown"
    )


def load_checkpoint_model(
    checkpoint: str | os.PathLike[str], base: str | os.PathLike[str] | None = None, dtype: str | None = None
) -> CheckpointModel:
    """The policy of `checkpoint` in memory (eval mode, CPU). `base` replaces the base model meta.json names;
    `dtype` (float32 | bfloat16) the dtype it trained in."""
    from transformers import AutoModelForCausalLM

    from rl.models import resolve_model_reference

    path = learner_dir(checkpoint)
    real = Path(os.path.realpath(path))
    meta = json.loads((real / "meta.json").read_text())
    lora = meta.get("finetune") == "lora"
    base_dir = Path(base).expanduser().resolve() if base else resolve_model_reference(meta.get("model", ""))
    torch_dtype = _DTYPES[dtype or meta.get("dtype") or "float32"]
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch_dtype)
    if lora and (real / ADAPTER_CONFIG).is_file() and (real / ADAPTER_WEIGHTS).is_file():
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(real), is_trainable=False)
    else:
        if lora:
            from peft import LoraConfig, get_peft_model

            s = _lora_settings(meta, real)
            model = get_peft_model(
                model,
                LoraConfig(
                    r=s["r"],
                    lora_alpha=s["alpha"],
                    lora_dropout=s["dropout"],
                    target_modules=list(s["target_modules"]),
                    bias="none",
                    task_type="CAUSAL_LM",
                ),
                autocast_adapter_dtype=True,
            )
        _load_trained_weights(model, real, meta)
    return CheckpointModel(model.eval(), lora, base_dir, meta, path)


def _load_trained_weights(model: torch.nn.Module, directory: Path, meta: dict[str, Any]) -> None:
    """The checkpoint's trainable weights into `model`, by the names the learner saved them under (its
    trainable.safetensors), or from a sharded learner's DCP shards."""
    params = dict(model.named_parameters())
    if meta.get("format") == "dcp":
        import torch.distributed.checkpoint as dcp

        from rl.learner.logprobs import PolicyNet

        net = PolicyNet(model, None, peft=meta.get("finetune") == "lora")
        wanted = [n for n, p in net.named_parameters() if meta.get("finetune") != "lora" or "lora_" in n]
        state = {"model": {n: p.detach().clone() for n, p in net.named_parameters() if n in set(wanted)}}
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
        weights = {n.removeprefix("model."): t for n, t in state["model"].items()}
    else:
        from safetensors.torch import load_file

        weights = {
            k: v
            for k, v in load_file(str(directory / "trainable.safetensors")).items()
            if not k.startswith("value_head.")
        }
    unknown = sorted(set(weights) - set(params))
    if unknown:
        raise ValueError(
            f"{directory} does not fit its base model: unexpected weights {unknown[:3]} "
            "(another base model or LoRA target set?)"
        )
    with torch.no_grad():
        for name, value in weights.items():
            if params[name].shape != value.shape:
                raise ValueError(
                    f"{directory}: {name} has shape {tuple(value.shape)}, the model "
                    f"{tuple(params[name].shape)} (another base model?)"
                )
            params[name].copy_(value)


def export_checkpoint(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    kind: Literal["merged", "adapter"] = "merged",
    base: str | os.PathLike[str] | None = None,
    dtype: str | None = None,
) -> CheckpointModel:
    """Write `checkpoint`'s policy to the directory `out` (which must not exist or be empty).

    merged: model.safetensors + config + generation config + the base model's tokenizer files, adapter merged
    in (AutoModelForCausalLM.from_pretrained(out), `vllm serve out`). adapter (LoRA only): adapter_model.safetensors
    + adapter_config.json naming this machine's base directory (PeftModel.from_pretrained(base, out), or
    `vllm serve BASE --enable-lora --lora-modules name=out`), with the base model's tokenizer files."""
    if kind not in ("merged", "adapter"):
        raise ValueError(f"export kind must be merged or adapter, not {kind!r}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory")
    loaded = load_checkpoint_model(checkpoint, base, dtype)
    if kind == "adapter" and not loaded.lora:
        raise ValueError(
            f"{loaded.path} is a {loaded.meta.get('finetune')} fine-tune: it has no adapter (export it merged)"
        )
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if kind == "merged":
            export_weights(loaded.model, "merged", str(tmp), lora=loaded.lora, source_dir=str(loaded.base_dir))
        else:
            write_adapter(loaded.model, str(tmp), str(loaded.base_dir))
            from rl.learner.export import TOKENIZER_FILES

            for name in TOKENIZER_FILES:
                if (loaded.base_dir / name).is_file():
                    shutil.copyfile(loaded.base_dir / name, tmp / name)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return loaded
