"""What the local engines (vllm, hf) share: chat prompts as exact token ids, per-sample seeds, the tokenizer."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rl.types import Message, RolloutRequest


def sample_seed(seed: int | None, request_id: str, index: int) -> int | None:
    """The seed of sample `index` of a request: a step with the same SamplingConfig.seed is reproducible,
    and no two samples share a stream. None: unseeded."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}/{request_id}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def load_tokenizer(model_dir: str | Path, chat_template: str | None = None) -> Any:
    """The model's tokenizer; `chat_template` (a Jinja file) replaces the tokenizer's own template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if chat_template is not None:
        tokenizer.chat_template = Path(chat_template).read_text()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def prompt_ids(tokenizer: Any, messages: list[Message]) -> list[int]:
    """The chat template applied here, so that the ids the engine sees are exactly the ids the learner trains on."""
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def check_requests(requests: list[RolloutRequest], max_model_len: int, prompts: list[list[int]]) -> None:
    """A prompt that leaves no room for a single completion token is a caller error, not a silent truncation."""
    seen: set[str] = set()
    for request, ids in zip(requests, prompts):
        if request.request_id in seen:
            raise ValueError(f"duplicate request_id {request.request_id!r} in one generate() call")
        seen.add(request.request_id)
        if len(ids) >= max_model_len:
            raise ValueError(
                f"request {request.request_id!r}: prompt of {len(ids)} tokens does not fit "
                f"max_model_len={max_model_len}"
            )


def shared_memory_segments(pid: int) -> list[str]:
    """The Python shared-memory segments (/dev/shm/psm_*: vLLM's message queues) that process `pid` and its
    descendants have mapped."""
    import psutil

    found: set[str] = set()
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/maps") as f:
                found.update(
                    line.split(None, 5)[5].strip()
                    for line in f
                    if "/dev/shm/psm_" in line and len(line.split(None, 5)) == 6
                )
        except OSError:  # exited meanwhile
            continue
    return sorted(p.removesuffix(" (deleted)") for p in found if not p.endswith("(deleted)"))
