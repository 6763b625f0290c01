"""Checkpoints of a sharded learner with torch.distributed.checkpoint (DCP): resumable on any number of ranks.

Layout (published atomically like rl.learner.checkpoint: a fresh sibling directory, fsynced, then the link
`path` swapped):

    dcp/                  DCP shards of the trainable weights (the adapter, or all weights, and the value
                          head) and of the AdamW states, keyed by parameter name, not by rank
    trainer_state.pt      lr schedulers and the torch RNG state (rank 0's)
    meta.json             format "dcp", world size, version, optimizer steps, Python RNG, extra (written last)

DCP reshards on load, so a checkpoint written by 2 ranks loads into 1 or 4, and into the single-process
Policy (no process group: rl.learner.checkpoint.load sends format "dcp" here).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from typing import Any

import torch
import torch.distributed as dist

from rl.learner.checkpoint_files import fsync_path, json_extra, model_meta, new_checkpoint_dir, publish
from rl.rng_state import decode_python_rng, encode_python_rng

FORMAT = "dcp"


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _state(policy) -> dict[str, Any]:
    """The DCP state: trainable weights and optimizer states, as the state_dict API names them (FQNs)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(ignore_frozen_params=True)
    state = {
        "model": get_model_state_dict(policy.net, options=options),
        "optimizer": get_optimizer_state_dict(policy.net, policy.optimizer, options=options),
    }
    if policy.value_optimizer is not None:
        state["value_optimizer"] = get_optimizer_state_dict(policy.net, policy.value_optimizer, options=options)
    return state


def save(policy, path: str, extra: dict[str, Any]) -> None:
    """Every rank calls it; rank 0 creates the directory and publishes it."""
    import torch.distributed.checkpoint as dcp

    meta_extra = json_extra(extra)
    box: list[Any] = [new_checkpoint_dir(path) if _rank() == 0 else None]
    if _distributed():
        dist.broadcast_object_list(box, src=0)
    path, tmp_dir = box[0]
    try:
        dcp.save(_state(policy), checkpoint_id=os.path.join(tmp_dir, "dcp"))
        if _distributed():
            dist.barrier()
        if _rank() == 0:
            state = {"scheduler": policy.scheduler.state_dict(), "torch_rng": torch.get_rng_state()}
            if policy.value_scheduler is not None:
                state["value_scheduler"] = policy.value_scheduler.state_dict()
            torch.save(state, os.path.join(tmp_dir, "trainer_state.pt"))
            meta = {
                "format": FORMAT,
                "world_size": dist.get_world_size() if _distributed() else 1,
                "version": policy.version,
                "optimizer_steps": policy.optimizer_steps,
                "python_rng": encode_python_rng(random.getstate()),
                "extra": meta_extra,
                **model_meta(policy.config),
                "value_head": policy.value_head is not None,
            }
            with open(os.path.join(tmp_dir, "meta.json"), "w") as f:
                json.dump(meta, f)
            for root, _, files in os.walk(tmp_dir):
                for file in files:
                    fsync_path(os.path.join(root, file))
                fsync_path(root)
            publish(path, tmp_dir)
    except BaseException:
        if _rank() == 0:
            shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    if _distributed():
        dist.barrier()


def load(policy, path: str) -> dict[str, Any]:
    """Every rank calls it (any world size, or a single process without a group)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    directory = os.path.realpath(path)
    with open(os.path.join(directory, "meta.json")) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a sharded (dcp) learner checkpoint")
    if meta.get("finetune") != policy.config.finetune:
        raise ValueError(f"{path} holds a {meta.get('finetune')} checkpoint; the policy is {policy.config.finetune}")
    if meta.get("value_head", False) != (policy.value_head is not None):
        raise ValueError(
            f"{path}: value head {'present' if meta.get('value_head') else 'absent'} in the checkpoint, "
            "not in this policy (another algorithm?)"
        )
    state = _state(policy)
    try:
        dcp.load(state, checkpoint_id=os.path.join(directory, "dcp"))
    except Exception as e:  # missing keys or other shapes: another model or LoRA target set
        raise ValueError(f"{path} does not fit this policy: {type(e).__name__}: {str(e)[:300]}") from None
    # not strict: the frozen base is not in the state (dcp.load above already refused missing trainable keys)
    options = StateDictOptions(ignore_frozen_params=True, strict=False)
    set_model_state_dict(policy.net, state["model"], options=options)
    set_optimizer_state_dict(policy.net, policy.optimizer, state["optimizer"], options=options)
    if policy.value_optimizer is not None:
        set_optimizer_state_dict(policy.net, policy.value_optimizer, state["value_optimizer"], options=options)
    trainer = torch.load(os.path.join(directory, "trainer_state.pt"), map_location="cpu", weights_only=True)
    policy.scheduler.load_state_dict(trainer["scheduler"])
    if policy.value_scheduler is not None:
        policy.value_scheduler.load_state_dict(trainer["value_scheduler"])
    torch.set_rng_state(trainer["torch_rng"])
    random.setstate(decode_python_rng(meta["python_rng"]))
    policy.version = int(meta["version"])
    policy.optimizer_steps = int(meta["optimizer_steps"])
    return meta["extra"]
