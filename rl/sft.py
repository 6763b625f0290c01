"""Supervised warm-start: cross-entropy on the completion tokens of (messages, completion) pairs.

The pairs are verified solutions of OTHER problems than those the RL run trains on (a stage users want
anyway, and the curriculum of small models that cold-start on kernels). The prompt is rendered with
the model's own chat template exactly as the rollout engines render it (add_generation_prompt=True),
the completion is what follows it in the rendered conversation (the answer and its end-of-turn
token), and only completion tokens carry loss. The result is written as an adapter or a merged model.

    python -m rl.sft --model DIR --data pairs.jsonl --output DIR [--export merged|lora] [--epochs 2] ...

pairs.jsonl: one {"messages": [{"role": ..., "content": ...}, ...], "completion": "..."} per line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from typing import Any, Literal, Sequence

from rl.types import Message


@dataclasses.dataclass(frozen=True)
class SFTExample:
    messages: list[Message]
    completion: str


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    epochs: int = 2
    batch_size: int = 8  # examples per optimizer step
    max_length: int = 4096  # longer examples are dropped (counted in the result), never truncated
    export: Literal["merged", "lora"] = "merged"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.max_length < 2:
            raise ValueError("sft needs epochs >= 1, batch_size >= 1 and max_length >= 2")
        if self.export not in ("merged", "lora"):
            raise ValueError(f"sft export must be merged or lora, not {self.export!r}")


def tokenize_example(tokenizer, example: SFTExample) -> tuple[list[int], int]:
    """(prompt ids + completion ids, prompt length) with the model's chat template."""
    if not example.completion.strip():
        raise ValueError("an SFT example has an empty completion")
    prompt = tokenizer.apply_chat_template(example.messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        [*example.messages, {"role": "assistant", "content": example.completion}], tokenize=False
    )
    if not full.startswith(prompt):
        raise ValueError(
            "the chat template does not render the conversation as prompt + answer; "
            "cannot tell the completion tokens apart"
        )
    # The end-of-turn marker is part of what the model must learn to produce; trailing whitespace after
    # it is never generated (the engine stops at the marker).
    completion = full[len(prompt) :].rstrip()
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    completion_ids = tokenizer(completion, add_special_tokens=False).input_ids
    return prompt_ids + completion_ids, len(prompt_ids)


def run_sft(
    policy_config,
    examples: Sequence[SFTExample],
    output: str,
    config: SFTConfig = SFTConfig(),
    tokenizer=None,
    model=None,
) -> dict[str, Any]:
    """Train on `examples`, write the result to `output`; returns per-epoch losses and timings.

    `policy_config` is a rl.learner.config.PolicyConfig (model dir, LoRA, optimizer, dtype, device).
    `tokenizer` defaults to the model directory's; `model` optionally replaces loading it.
    """
    from transformers import AutoTokenizer

    from rl.learner.config import AlgorithmConfig
    from rl.learner.policy import Policy

    if not examples:
        raise ValueError("sft needs at least one example")
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(policy_config.model)
    rows, dropped = [], 0
    for example in examples:
        ids, prompt_length = tokenize_example(tokenizer, example)
        if len(ids) > config.max_length:
            dropped += 1
            continue
        rows.append((ids, prompt_length))
    if not rows:
        raise ValueError(f"all {len(examples)} SFT examples are longer than max_length={config.max_length}")
    policy = Policy(policy_config, AlgorithmConfig(), model=model)
    rng = random.Random(config.seed)
    start = time.perf_counter()
    epochs = []
    from tqdm import tqdm

    steps_per_epoch = -(-len(rows) // config.batch_size)
    bar = tqdm(total=config.epochs * steps_per_epoch, desc="sft", unit="step", dynamic_ncols=True)
    for _ in range(config.epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        losses, tokens = [], 0
        for i in range(0, len(order), config.batch_size):
            part = [rows[j] for j in order[i : i + config.batch_size]]
            metrics = policy.sft_step([ids for ids, _ in part], [p for _, p in part])
            losses.append(metrics["loss"])
            tokens += int(metrics["completion_tokens"])
            bar.update()
            bar.set_postfix(loss=f"{metrics['loss']:.3f}")
        epochs.append({"loss": sum(losses) / len(losses), "completion_tokens": tokens})
    bar.close()
    train_seconds = time.perf_counter() - start
    update = policy.export_weights(config.export, output)
    if config.export == "merged":
        tokenizer.save_pretrained(output)  # the merged directory is a complete model for vLLM
    return {
        "epochs": epochs,
        "examples": len(rows),
        "dropped_too_long": dropped,
        "output": output,
        "train_seconds": train_seconds,
        "export_seconds": update.seconds,
    }


def read_examples(path: str) -> list[SFTExample]:
    examples = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                messages, completion = record["messages"], record["completion"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f'{path}:{n}: expected {{"messages": [...], "completion": "..."}} ({e})') from None
            if (
                not isinstance(messages, list)
                or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
                or not isinstance(completion, str)
            ):
                raise ValueError(f"{path}:{n}: messages must be a list of {{role, content}} and completion a string")
            examples.append(SFTExample(messages=messages, completion=completion))
    return examples


def main(argv: list[str] | None = None) -> int:
    from rl.learner.config import LoraSettings, OptimizerSettings, PolicyConfig

    p = argparse.ArgumentParser(prog="python -m rl.sft", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="local HF model directory (with its tokenizer)")
    p.add_argument("--data", required=True, help="JSONL of {messages, completion}")
    p.add_argument("--output", required=True, help="directory to write the adapter or merged model to")
    p.add_argument("--export", choices=["merged", "lora"], default="merged")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-length", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--finetune", choices=["lora", "full"], default="lora")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        examples = read_examples(args.data)
        policy = PolicyConfig(
            model=args.model,
            finetune=args.finetune,
            dtype=args.dtype,
            device=args.device,
            seed=args.seed,
            lora=LoraSettings(r=args.lora_r, alpha=args.lora_alpha),
            optimizer=OptimizerSettings(lr=args.lr),
        )
        config = SFTConfig(
            epochs=args.epochs,
            batch_size=args.batch_size,
            max_length=args.max_length,
            export=args.export,
            seed=args.seed,
        )
        result = run_sft(policy, examples, args.output, config)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
