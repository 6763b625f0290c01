"""Problems -> the RFT JSONL: one line per problem, `{"messages": [...], "problem_id", "problem_sha256"}`.

The messages are the open-model loop's prompts (rl.prompts, same templates and one-shot store); the two
extra fields are what the grader forwards to /reward (`item.problem_id`, `item.problem_sha256`): the id
names the problem, the hash makes the service refuse (409) to grade against a different version of it.
The train/validation split is the loop's (rl.data: salted id hash or explicit ids), so a hosted run and an
open-model run of one recipe hold out the same problems.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from envs.problems import Problem
from rl.data import ProblemData
from rl.hosted.errors import EXIT_CONFIG, HostedError

__all__ = ["ExportedDataset", "export_dataset", "rft_row"]


@dataclasses.dataclass(frozen=True)
class ExportedDataset:
    train_path: Path
    validation_path: Path | None  # None: no problem held out
    train_ids: tuple[str, ...]
    validation_ids: tuple[str, ...]


def rft_row(problem: Problem, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if not messages or messages[-1].get("role") != "user":
        # RFT samples the assistant's answer to the last message, which must be the user's.
        raise HostedError(f"{problem.id}: the prompt must end with a user message for RFT", EXIT_CONFIG)
    return {
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "problem_id": problem.id,
        "problem_sha256": problem.sha256,
    }


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def export_dataset(
    data: ProblemData, prompts: Any, out_dir: Path, max_validation_rows: int | None = None
) -> ExportedDataset:
    """Write rft_train.jsonl (and rft_validation.jsonl when problems are held out) into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train = sorted(data.train, key=lambda p: p.id)
    validation = sorted(data.validation, key=lambda p: p.id)[:max_validation_rows]
    train_path = out_dir / "rft_train.jsonl"
    _write(train_path, [rft_row(p, prompts.build(p).messages) for p in train])
    validation_path = None
    if validation:
        validation_path = out_dir / "rft_validation.jsonl"
        _write(validation_path, [rft_row(p, prompts.build(p).messages) for p in validation])
    return ExportedDataset(train_path, validation_path, tuple(p.id for p in train), tuple(p.id for p in validation))
