"""Run checkpoints: the learner's state and the loop's (step, data position, RNG), written atomically.

    RUN_DIR/checkpoints/step_000010/learner/         the learner's own checkpoint (weights, optimizer, RNG)
    RUN_DIR/checkpoints/step_000010/loop_state.json  step, sampler state, policy version, loop RNG, config hash
    RUN_DIR/checkpoints/latest                       the name of the newest complete checkpoint

A checkpoint is built in a temporary sibling directory and renamed into place only when complete, and
`latest` is replaced atomically after that, so a crash at any moment leaves the previous checkpoint
intact and `latest` naming a complete one. `resume=PATH` takes a step directory, a checkpoints
directory or a run directory (the latter two: their `latest`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from rl.learner.checkpoint_files import fsync_path

__all__ = [
    "CheckpointError",
    "LoopState",
    "find_checkpoint",
    "previous_run_dir",
    "save_checkpoint",
    "prune_checkpoints",
]

LATEST = "latest"
STATE_FILE = "loop_state.json"
LEARNER_DIR = "learner"


class CheckpointError(ValueError):
    """A resume path that holds no usable checkpoint; the message says what was found."""


@dataclasses.dataclass(frozen=True)
class LoopState:
    step: int  # steps completed
    policy_version: int
    sampler: dict[str, Any]
    rng: list[Any]  # random.Random.getstate() of the loop's RNG, JSON-encoded
    run_dir: str  # the run that wrote it (a resumed run continues its metrics.jsonl)
    config_fingerprint: str = ""  # data + algorithm + rollout settings the sequence depends on
    wandb_run_id: str = ""  # the W&B run a resumed run continues ("": none, or written before runs had one)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> LoopState:
        return cls(**json.loads(text))


def save_checkpoint(checkpoints_dir: str | Path, state: LoopState, save_learner: Callable[[str], None]) -> Path:
    """Write step `state.step`'s checkpoint; `save_learner(path)` writes the learner's part into `path`."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{state.step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        save_learner(str(tmp / LEARNER_DIR))
        with open(tmp / STATE_FILE, "w") as f:
            f.write(state.to_json())
            f.flush()
            os.fsync(f.fileno())
        fsync_path(tmp)
        if final.exists():  # a re-run of the same step (after a resume): the new one replaces it
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_path(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pointer = root / f".{LATEST}.tmp"
    pointer.write_text(final.name + "\n")
    os.replace(pointer, root / LATEST)
    fsync_path(root)
    return final


def prune_checkpoints(checkpoints_dir: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` step checkpoints (never the one `latest` names)."""
    root = Path(checkpoints_dir)
    latest = (root / LATEST).read_text().strip() if (root / LATEST).exists() else None
    steps = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in steps[:-keep] if keep > 0 else steps:
        if old.name != latest:
            shutil.rmtree(old, ignore_errors=True)


def find_checkpoint(path: str | Path) -> tuple[Path, LoopState]:
    """The step directory `path` designates, and its loop state."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"resume={path}: no such file or directory")
    for candidate in (p, p / "checkpoints"):
        if (candidate / LATEST).is_file():
            p = candidate / (candidate / LATEST).read_text().strip()
            break
    state_file = p / STATE_FILE
    if not state_file.is_file() or not (p / LEARNER_DIR).is_dir():
        raise CheckpointError(
            f"resume={path}: {p} is not a complete checkpoint (no {STATE_FILE} and {LEARNER_DIR}/); "
            "pass a run directory, its checkpoints/ or one checkpoints/step_N"
        )
    try:
        return p, LoopState.from_json(state_file.read_text())
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"resume={path}: {state_file} is unreadable ({e})") from None


def previous_run_dir(directory: str | Path, state: LoopState) -> Path:
    """The run directory a checkpoint belongs to: the one around it (`RUN/checkpoints/step_N`), where the run was
    copied or moved as a whole, else the path it was written from."""
    around = Path(directory).resolve().parent.parent
    if Path(directory).resolve().parent.name == "checkpoints" and (around / "metrics.jsonl").is_file():
        return around
    return Path(state.run_dir)
