"""Learner throughput: tokens/s and MFU of a GRPO train_step (forward, backward, AdamW) on random tokens.

    # one H200, random-init ~0.5B Llama (rl.models preset llama-0.5b), bf16, LoRA and full fine-tuning
    python scripts/bench_learner.py --preset llama-0.5b --finetune lora full --dtype bfloat16 --batch 8 --seq-len 2048
    # CPU, SmolLM2-135M from a local HF directory, fp32 vs bf16 (the default CPU run's learner)
    python scripts/bench_learner.py --model DIR --device cpu --dtype float32 bfloat16 --batch 8 --seq-len 512 --steps 1

One JSON line per configuration: seconds per step (median of --steps after --warmup), tokens/s,
cpu_seconds_per_step (process CPU time: comparable between runs on a busy shared machine),
MFU = 6 * params * tokens/s / peak (989e12: the H200's dense bf16 peak; 6 * params per token is the
forward + backward of a full fine-tune, so LoRA's MFU by this formula counts work it skips: the
weight gradients of frozen layers), peak GPU memory. Needs torch, transformers, peft, safetensors;
no Ray, Hydra or vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import from_preset  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

H200_BF16_DENSE_FLOPS = 989e12


def random_batch(vocab: int, batch: int, seq_len: int, prompt_len: int, seed: int = 0) -> TrainBatch:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=g).tolist()
    return TrainBatch(input_ids=ids, prompt_lengths=[prompt_len] * batch,
                      advantages=[1.0 if i % 2 else -1.0 for i in range(batch)],
                      rollout_logprobs=[None] * batch, group_ids=[str(i // 4) for i in range(batch)], policy_version=0)


def build_model(args):
    if args.model:
        return None  # Policy loads policy.model
    return from_preset(args.preset)


def bench_one(args, finetune: str, dtype: str) -> dict:
    torch.manual_seed(0)
    model = build_model(args)
    policy_cfg = PolicyConfig(model=args.model or "", finetune=finetune, dtype=dtype, device=args.device,
                              gradient_checkpointing=args.gradient_checkpointing,
                              micro_batch_tokens=args.micro_batch_tokens, logprob_chunk_tokens=args.chunk_tokens,
                              lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r),
                              optimizer=OptimizerSettings(lr=1e-6), attn_implementation=args.attn)
    policy = Policy(policy_cfg, AlgorithmConfig(), model=model)
    lm = policy.causal_lm
    params = sum(p.numel() for n, p in lm.named_parameters() if "lora_" not in n)
    trainable = sum(p.numel() for p in policy.trainable_state().values())
    batch = random_batch(lm.config.vocab_size, args.batch, args.seq_len, args.prompt_len)
    cuda = policy.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, cpu_times = [], []
    for i in range(args.warmup + args.steps):
        if cuda:
            torch.cuda.synchronize()
        start, cpu_start = time.perf_counter(), time.process_time()
        policy.train_step(batch)
        if cuda:
            torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
    seconds = statistics.median(times)
    tokens = args.batch * args.seq_len
    tps = tokens / seconds
    result = {"model": args.model or f"random:{args.preset}", "finetune": finetune, "dtype": dtype, "device": str(policy.device),
              "params": params, "trainable_params": trainable, "batch": args.batch, "seq_len": args.seq_len,
              "gradient_checkpointing": args.gradient_checkpointing, "micro_batch_tokens": args.micro_batch_tokens,
              "seconds_per_step": round(seconds, 4), "tokens_per_s": round(tps, 1),
              "mfu_h200": round(6 * params * tps / H200_BF16_DENSE_FLOPS, 4), "threads": torch.get_num_threads(),
              # CPU seconds of this process per step: on a shared CPU, less distorted by other load than wall time
              "cpu_seconds_per_step": round(statistics.median(cpu_times), 2)}
    if cuda:
        result["gpu"] = torch.cuda.get_device_name()
        result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del policy, model
    if cuda:
        torch.cuda.empty_cache()
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="llama-0.5b",
                   help="random-init shape from rl.models.RANDOM_PRESETS (ignored with --model)")
    p.add_argument("--model", default=None, help="a local HF model directory instead of a random-init one")
    p.add_argument("--finetune", nargs="+", choices=["lora", "full"], default=["lora", "full"])
    p.add_argument("--dtype", nargs="+", choices=["float32", "bfloat16"], default=["bfloat16"])
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--micro-batch-tokens", type=int, default=16384)
    p.add_argument("--chunk-tokens", type=int, default=2048)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args(argv)
    if args.prompt_len >= args.seq_len:
        p.error("--prompt-len must be below --seq-len")
    for finetune in args.finetune:
        for dtype in args.dtype:
            print(json.dumps(bench_one(args, finetune, dtype)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
