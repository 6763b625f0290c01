"""How a checkpoint directory becomes visible atomically: written beside its link, fsynced, then the link swapped;
and what its meta.json says about the model. Shared by the single-process checkpoint (checkpoint.py), the sharded
one (sharded_checkpoint.py) and the loop's own state (rl/loop_checkpoints.py), so none of them imports another
for it."""

from __future__ import annotations

import json
import os
import shutil
import dataclasses
import uuid
from typing import Any


def json_extra(extra: dict[str, Any]) -> Any:
    try:
        return json.loads(json.dumps(extra))
    except (TypeError, ValueError) as e:
        raise ValueError(f"checkpoint extra must be JSON-serializable: {e}") from None


def new_checkpoint_dir(path: str) -> tuple[str, str]:
    """(absolute link path, a fresh sibling directory to write the checkpoint into)."""
    path = os.path.abspath(path)
    if os.path.lexists(path) and not os.path.islink(path):
        raise ValueError(f"checkpoint path {path} exists and is not a checkpoint link; choose another path")
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp_dir = os.path.join(parent, f".{name}.{uuid.uuid4().hex[:12]}")
    os.mkdir(tmp_dir)
    return path, tmp_dir


def publish(path: str, tmp_dir: str) -> None:
    """Point the link `path` at the complete, fsynced `tmp_dir` atomically; then delete the previous target."""
    parent, name = os.path.split(path)
    previous = os.readlink(path) if os.path.islink(path) else None
    link = os.path.join(parent, f".{name}.link-{uuid.uuid4().hex[:12]}")
    os.symlink(os.path.basename(tmp_dir), link)  # relative: the checkpoint directory can be moved as a whole
    os.replace(link, path)
    fsync_path(parent)
    if previous and os.path.basename(previous).startswith(f".{name}."):
        shutil.rmtree(os.path.join(parent, previous), ignore_errors=True)


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's or a directory's entry to disk (a directory: so a rename inside it survives a crash)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def base_model_reference(config: Any) -> str:
    """The policy's base model as checkpoints record it (rl.models.model_reference; "" for an in-memory model)."""
    from rl.models import model_reference

    return model_reference(config.model) if config.model else ""


def model_meta(config: Any) -> dict[str, Any]:
    """What meta.json says about the model, so a checkpoint can be rebuilt without the run's config
    (rl.learner.checkpoint_export): the base model's portable name, finetune, the LoRA settings, dtype."""
    meta = {"finetune": config.finetune, "model": base_model_reference(config), "dtype": config.dtype}
    if config.finetune == "lora":
        meta["lora"] = dataclasses.asdict(config.lora)
    return meta
