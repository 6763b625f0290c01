"""Atomic learner checkpoints: trainable weights, optimizer, scheduler, counters, RNG, and an opaque `extra`.

`path` is a symbolic link to a sibling directory that holds trainable.safetensors, trainer_state.pt, for LoRA
the adapter in peft's format, and meta.json (written last; it names the base model portably). A save writes a
new directory, fsyncs it, swaps the link with os.replace and only then deletes the previous one, so a crash
leaves `path` at a complete checkpoint, old or new. The layout file by file: docs/learner.md."""

from __future__ import annotations

import json
import os
import random
import shutil
from typing import Any

import torch

from rl.learner.checkpoint_files import (
    base_model_reference,
    fsync_path,
    json_extra,
    model_meta,
    new_checkpoint_dir,
    publish,
)
from rl.learner.export import ADAPTER_CONFIG, ADAPTER_WEIGHTS, write_adapter
from rl.rng_state import decode_python_rng, encode_python_rng

FORMAT = 1
_FILES = ("trainable.safetensors", "trainer_state.pt", "meta.json")


def save(policy: Any, path: str, extra: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    meta_extra = json_extra(extra)
    path, tmp_dir = new_checkpoint_dir(path)
    try:
        weights = {k: v.detach().to("cpu").contiguous() for k, v in policy.trainable_state().items()}
        save_file(weights, os.path.join(tmp_dir, "trainable.safetensors"))
        state = {
            "optimizer": policy.optimizer.state_dict(),
            "scheduler": policy.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
        }
        if policy.value_optimizer is not None:  # PPO's value head has an optimizer of its own
            state["value_optimizer"] = policy.value_optimizer.state_dict()
            state["value_scheduler"] = policy.value_scheduler.state_dict()
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        torch.save(state, os.path.join(tmp_dir, "trainer_state.pt"))
        base = base_model_reference(policy.config)
        files = list(_FILES)
        if policy.config.finetune == "lora":
            write_adapter(policy.model, tmp_dir, base)
            files += [ADAPTER_WEIGHTS, ADAPTER_CONFIG]
        meta = {
            "format": FORMAT,
            "version": policy.version,
            "optimizer_steps": policy.optimizer_steps,
            "python_rng": encode_python_rng(random.getstate()),
            "extra": meta_extra,
            **model_meta(policy.config),
        }
        with open(os.path.join(tmp_dir, "meta.json"), "w") as f:
            json.dump(meta, f)
        for file in files:
            fsync_path(os.path.join(tmp_dir, file))
        fsync_path(tmp_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    publish(path, tmp_dir)


def load(policy: Any, path: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    directory = os.path.realpath(path)
    meta_path = os.path.join(directory, "meta.json")
    if not os.path.isfile(meta_path):
        raise FileNotFoundError(f"{path} is not a learner checkpoint (no meta.json)")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("format") == "dcp":  # written by a sharded learner: loadable at any world size
        from rl.learner import sharded_checkpoint

        return sharded_checkpoint.load(policy, path)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {meta.get('format')} (this code reads {FORMAT})")
    if meta.get("finetune") != policy.config.finetune:
        raise ValueError(f"{path} holds a {meta.get('finetune')} checkpoint; the policy is {policy.config.finetune}")
    weights = load_file(os.path.join(directory, "trainable.safetensors"))
    params = policy.trainable_state()
    if set(weights) != set(params):
        missing, unexpected = sorted(set(params) - set(weights)), sorted(set(weights) - set(params))
        raise ValueError(
            f"{path} does not fit this policy: missing {missing[:3]}, unexpected {unexpected[:3]} "
            "(another model or LoRA target set?)"
        )
    for name, p in params.items():
        if weights[name].shape != p.shape:
            raise ValueError(f"{path}: {name} has shape {tuple(weights[name].shape)}, the policy {tuple(p.shape)}")
    state = torch.load(os.path.join(directory, "trainer_state.pt"), map_location="cpu", weights_only=True)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(weights[name])
    policy.optimizer.load_state_dict(state["optimizer"])
    policy.scheduler.load_state_dict(state["scheduler"])
    if policy.value_optimizer is not None:
        policy.value_optimizer.load_state_dict(state["value_optimizer"])
        policy.value_scheduler.load_state_dict(state["value_scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    random.setstate(decode_python_rng(meta["python_rng"]))
    policy.version = int(meta["version"])
    policy.optimizer_steps = int(meta["optimizer_steps"])
    return meta["extra"]
