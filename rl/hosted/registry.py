"""Register what a job produced: RUN_DIR/hosted_model.json and the scripts/benchmark.py command for it.

A fine-tuned model is served by the same API as its base (`ft:<base>:<org>:<suffix>:<id>`), so the benchmark
runs it with the API policy's engine and the model name overridden. `reasoning_model=true` is explicit because
the openai engine recognises reasoning models by name (o*, gpt-5*), which an `ft:` name does not match.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rl.hosted.monitor import JobOutcome

__all__ = ["benchmark_overrides", "register"]


def benchmark_overrides(model: str, policy: str = "gpt5", reasoning: bool = True) -> list[str]:
    overrides = [f"policy={policy}", f"policy.name={model}", f"policy.model={model}", f"policy.engine.model={model}"]
    if reasoning:
        overrides.append("++policy.engine.reasoning_model=true")  # not in gpt5.yaml: add or override
    return overrides


def register(
    run_dir: Path, outcome: JobOutcome, base_model: str, files: dict[str, Any], reasoning: bool = True
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "job_id": outcome.job_id,
        "status": outcome.status,
        "base_model": base_model,
        "fine_tuned_model": outcome.fine_tuned_model,
        "checkpoints": outcome.checkpoints,
        "error": outcome.error,
        "files": files,
    }
    if outcome.fine_tuned_model:
        args = benchmark_overrides(outcome.fine_tuned_model, reasoning=reasoning)
        record["benchmark_overrides"] = args
        record["benchmark_command"] = (
            "python scripts/benchmark.py " + " ".join(shlex.quote(a) for a in args) + " attempts=3 eval.device=cuda"
        )
    path = Path(run_dir) / "hosted_model.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return record
