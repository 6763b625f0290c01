#!/usr/bin/env python
"""Export a training checkpoint's policy to a Hugging Face directory.

  python scripts/export_checkpoint.py outputs/RUN/checkpoints/step_000010 --out exported/   # merged (default)
  python scripts/export_checkpoint.py outputs/RUN --out adapter/ --adapter                  # `latest`, LoRA only

CHECKPOINT is a step directory, its learner/ directory, a run's checkpoints/ or a run directory (the latter two:
the checkpoint `latest` names). --merged writes the full model with the adapter merged in (model.safetensors,
config, tokenizer): `AutoModelForCausalLM.from_pretrained(OUT)`, `vllm serve OUT`. --adapter writes the LoRA
adapter in peft's format: `PeftModel.from_pretrained(base, OUT)`, `vllm serve BASE --enable-lora --lora-modules
policy=OUT`. The base model is the one the checkpoint names, found in this machine's model cache
(KERNELRL_MODEL_CACHE) or Hub cache; --base DIR names it where it lives elsewhere. Exit codes: 0 written,
2 a checkpoint or base model that cannot be used (one line says why).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a run directory, its checkpoints/, one checkpoints/step_N or its learner/")
    parser.add_argument("--out", required=True, help="the directory to write (must not exist, or be empty)")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--merged",
        dest="kind",
        action="store_const",
        const="merged",
        help="the full model with the adapter merged in (the default)",
    )
    kind.add_argument(
        "--adapter",
        dest="kind",
        action="store_const",
        const="adapter",
        help="the LoRA adapter in peft's format (LoRA checkpoints only)",
    )
    parser.add_argument(
        "--base",
        default=None,
        help="the base model's directory (default: the one the checkpoint names, from the model cache)",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default=None,
        help="the exported dtype (default: the dtype it trained in)",
    )
    args = parser.parse_args(argv)

    from rl.loop_checkpoints import CheckpointError
    from rl.learner.checkpoint_export import export_checkpoint
    from rl.models import ModelSpecError

    try:
        loaded = export_checkpoint(args.checkpoint, args.out, args.kind or "merged", args.base, args.dtype)
    except (CheckpointError, ModelSpecError, FileExistsError, FileNotFoundError, ValueError) as e:
        print(f"export_checkpoint: {e}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "checkpoint": str(loaded.path.parent),
                "out": args.out,
                "kind": args.kind or "merged",
                "base_model": str(loaded.base_dir),
                "finetune": loaded.meta.get("finetune"),
                "version": loaded.meta.get("version"),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
