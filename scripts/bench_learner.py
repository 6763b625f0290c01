"""Learner throughput: tokens/s and MFU of a GRPO or PPO train_step on random tokens, and the seconds of a
full-weight sync into an hf engine. One JSON line per configuration (what each field means: docs/learner.md).

    python scripts/bench_learner.py --preset llama-0.5b --finetune lora full --dtype bfloat16 --batch 8 --seq-len 2048
    python scripts/bench_learner.py --model DIR --device cpu --dtype float32 bfloat16 --batch 8 --seq-len 512 --steps 1
    python scripts/bench_learner.py --preset llama-0.5b --fsdp --finetune full --algorithm grpo ppo --sync
    python scripts/bench_learner.py --preset smollm2-135m --device cpu --dtype float32 --finetune lora --batch 24 \
        --group-size 8 --prompt-len 1300 --seq-len 1550 --micro-batch-tokens 4096 --layout padded prefix
    torchrun --nproc-per-node 2 scripts/bench_learner.py --preset llama-0.5b --fsdp --finetune full

Needs torch, transformers, peft, safetensors; no Ray, Hydra or vLLM."""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

import torch

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig
from rl.learner.host_allocator import keep_freed_memory
from rl.learner.policy import Policy, resolve_device
from rl.learner.random_models import SMOLLM2_VOCAB, byte_tokenizer, from_preset
from rl.types import TrainBatch

H200_BF16_DENSE_FLOPS = 989e12


def random_batch(
    vocab: int, batch: int, seq_len: int, prompt_len: int, seed: int = 0, group_size: int = 0
) -> TrainBatch:
    """`batch` rows of `seq_len` random tokens; with `group_size`, GRPO-shaped instead: groups of that many rows
    share a prompt of `prompt_len` tokens, and completion lengths are drawn from [C/2, 3C/2], C = seq_len -
    prompt_len (sampled completions differ in length)."""
    g = torch.Generator().manual_seed(seed)
    if group_size:
        c = seq_len - prompt_len
        ids = []
        for i in range(batch):
            if i % group_size == 0:
                prompt = torch.randint(0, vocab, (prompt_len,), generator=g).tolist()
            n = int(torch.randint(max(1, c // 2), c + c // 2 + 1, (1,), generator=g))
            ids.append(prompt + torch.randint(0, vocab, (n,), generator=g).tolist())
    else:
        ids = torch.randint(0, vocab, (batch, seq_len), generator=g).tolist()
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=[prompt_len] * batch,
        advantages=[1.0 if i % 2 else -1.0 for i in range(batch)],
        rollout_logprobs=[None] * batch,
        group_ids=[str(i // (group_size or 4)) for i in range(batch)],
        policy_version=0,
        rewards=[float(i % 2) for i in range(batch)],
    )


def build_model(args):
    if args.model:
        return None  # Policy loads policy.model
    return from_preset(args.preset, vocab_size=args.vocab_size)


def timed_steps(step, args, cuda: bool) -> tuple[list[float], list[float], float]:
    """Wall and process-CPU seconds of each of --steps calls of `step` after --warmup untimed ones, and the wall
    seconds of the very first call (with --compile: the compile, paid once)."""
    times, cpu_times, first = [], [], 0.0
    for i in range(args.warmup + args.steps):
        if cuda:
            torch.cuda.synchronize()
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        if cuda:
            torch.cuda.synchronize()
        if i == 0:
            first = time.perf_counter() - start
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
    return times, cpu_times, first


def gpu_facts() -> dict:
    return {"gpu": torch.cuda.get_device_name(), "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}


def bench_one(args, finetune: str, dtype: str, algorithm: str = "grpo", layout: str = "auto") -> dict:
    torch.manual_seed(0)
    model = build_model(args)
    policy_cfg = PolicyConfig(
        model=args.model or "",
        finetune=finetune,
        dtype=dtype,
        device=args.device,
        gradient_checkpointing=args.gradient_checkpointing,
        micro_batch_tokens=args.micro_batch_tokens,
        logprob_chunk_tokens=args.chunk_tokens,
        lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r),
        optimizer=OptimizerSettings(lr=1e-6),
        attn_implementation=args.attn,
        cpu_offload=args.cpu_offload,
        compile=args.compile,
        layout=layout,
    )
    policy_cls = Policy
    if args.fsdp:
        from rl.learner.sharded import ShardedPolicy as policy_cls  # noqa: N813
    policy = policy_cls(policy_cfg, AlgorithmConfig.from_mapping({"name": algorithm}), model=model)
    lm = policy.causal_lm
    params = sum(p.numel() for n, p in lm.named_parameters() if "lora_" not in n)
    trainable = sum(p.numel() for p in policy.trainable_state().values())
    batch = random_batch(lm.config.vocab_size, args.batch, args.seq_len, args.prompt_len, group_size=args.group_size)
    cuda = policy.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, cpu_times, first = timed_steps(functools.partial(policy.train_step, batch), args, cuda)
    seconds = statistics.median(times)
    tokens = sum(map(len, batch.input_ids))
    tps = tokens / seconds
    # every rank takes its share of the same --batch rows: tokens / step seconds is the group's throughput
    world = torch.distributed.get_world_size() if args.fsdp else 1
    result = {
        "model": args.model or f"random:{args.preset}",
        "finetune": finetune,
        "dtype": dtype,
        "device": str(policy.device),
        "algorithm": algorithm,
        "fsdp": args.fsdp,
        "world_size": world,
        "compile": args.compile,
        "layout": policy.layout,
        "group_size": args.group_size,
        "params": params,
        "trainable_params": trainable,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "gradient_checkpointing": args.gradient_checkpointing,
        "micro_batch_tokens": args.micro_batch_tokens,
        "tokens": tokens,
        "seconds_per_step": round(seconds, 4),
        "step_seconds": [round(t, 2) for t in times],
        "first_step_s": round(first, 2),
        "tokens_per_s": round(tps, 1),
        "mfu_h200": round(6 * params * tps / (H200_BF16_DENSE_FLOPS * world), 4),
        "threads": torch.get_num_threads(),
        # CPU seconds of this process per step: on a shared CPU, less distorted by other load than wall time
        "cpu_seconds_per_step": round(statistics.median(cpu_times), 2),
    }
    if cuda:
        result.update(gpu_facts())
    if args.sync and algorithm == args.algorithm[0]:
        result["sync"] = bench_sync(args, policy)
    del policy, model
    if cuda:
        torch.cuda.empty_cache()
    return result


def _plain_step(lm, optimizer, ids, advantages, completion) -> None:
    logits = lm(input_ids=ids).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    loss = -(logp * advantages)[completion].mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def bench_plain(args, dtype: str) -> dict:
    """The anchor our learner must beat: the step a user writes with plain transformers + torch on the same model
    and batch (weights in `dtype`, AdamW, full float32 logits, log-softmax, the sampled tokens' logprobs times
    the advantages), no packing, chunking, LoRA or mixed precision."""
    torch.manual_seed(0)
    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    lm = build_model(args)
    if lm is None:
        from transformers import AutoModelForCausalLM

        lm = AutoModelForCausalLM.from_pretrained(args.model)
    lm = lm.to(device=device, dtype=getattr(torch, dtype))
    lm.config.use_cache = False
    if args.gradient_checkpointing:
        lm.gradient_checkpointing_enable()
    lm.train()
    optimizer = torch.optim.AdamW(lm.parameters(), lr=1e-6, fused=device.type == "cuda")
    batch = random_batch(lm.config.vocab_size, args.batch, args.seq_len, args.prompt_len)
    ids = torch.tensor(batch.input_ids, device=device)
    advantages = torch.tensor(batch.advantages, device=device)[:, None]
    completion = torch.zeros_like(ids[:, 1:], dtype=torch.bool)
    completion[:, args.prompt_len - 1 :] = True  # targets after the prompt
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    step = functools.partial(_plain_step, lm, optimizer, ids, advantages, completion)
    seconds = statistics.median(timed_steps(step, args, cuda)[0])
    del step
    params = sum(p.numel() for p in lm.parameters())
    tps = args.batch * args.seq_len / seconds
    result = {
        "model": args.model or f"random:{args.preset}",
        "finetune": "full",
        "dtype": dtype,
        "device": str(device),
        "algorithm": "plain",
        "params": params,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "gradient_checkpointing": args.gradient_checkpointing,
        "seconds_per_step": round(seconds, 4),
        "tokens_per_s": round(tps, 1),
        "mfu_h200": round(6 * params * tps / H200_BF16_DENSE_FLOPS, 4),
    }
    if cuda:
        result.update(gpu_facts())
    del lm, optimizer
    if cuda:
        torch.cuda.empty_cache()
    return result


def _receiver(model_dir: str, spec: dict, device: str, rounds: int, queue) -> None:
    """The hf engine in a process of its own: joins the channel as rank 1 and receives `rounds` broadcasts."""
    from rl.rollout.config import EngineConfig
    from rl.rollout.hf_engine import HFEngine

    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    engine = HFEngine(
        model_dir,
        EngineConfig(
            kind="hf",
            device="cuda" if device.startswith("cuda") else "cpu",
            dtype="bfloat16" if device.startswith("cuda") else "float32",
        ),
    )
    from rl.types import WeightUpdate

    # the file path (loop.sync=merged): the export just written, loaded into the running engine
    loads = [engine.update_weights(WeightUpdate(version=0, kind="merged", path=model_dir)) for _ in range(rounds)]
    queue.put(("ready", statistics.median(loads)))
    engine.open_weight_channel(spec, 1)
    queue.put([engine.receive_weights() for _ in range(rounds)])


def bench_sync(args, policy) -> dict:
    """Seconds of each full-weight sync path from this learner into an hf engine (median of --sync-rounds)."""
    import multiprocessing as mp
    import shutil
    import tempfile

    from rl.learner.export import merged_state_dict
    from rl.learner.full_state import serving_state_dict
    from rl.learner.network import free_port
    from rl.rollout.broadcast import ChannelSpec, open_channel, send

    cuda = policy.device.type == "cuda"
    sync = lambda: torch.cuda.synchronize() if cuda else None  # noqa: E731

    def gather():
        if args.fsdp:
            return serving_state_dict(policy.net, policy.config, cpu=False, rank0_only=False, is_rank0=True)
        return merged_state_dict(policy.model, policy.config.finetune == "lora")

    out: dict = {}
    times = []
    for _ in range(args.sync_rounds):
        sync()
        t = time.perf_counter()
        state = gather()
        sync()
        times.append(time.perf_counter() - t)
    out["gather_s"] = round(statistics.median(times), 3)
    out["bytes"] = sum(v.numel() * v.element_size() for v in state.values())
    # the engine's model directory (random weights, byte tokenizer: the engine only loads weights here)
    shm = os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free > 3 * out["bytes"]  # containers: often 64 MB
    root = tempfile.mkdtemp(prefix="kernelrl-bench-", dir="/dev/shm" if shm else None)
    out["export_dir"] = "/dev/shm" if shm else tempfile.gettempdir()
    try:
        from rl.learner.export import write_merged

        t = time.perf_counter()
        write_merged(
            {k: v.detach().cpu().contiguous() for k, v in state.items()},
            policy.causal_lm,
            os.path.join(root, "model"),
            None,
        )
        out["export_merged_s"] = round(time.perf_counter() - t, 3)
        byte_tokenizer().save_pretrained(os.path.join(root, "model"))
        device = "cuda:1" if args.sync_backend == "nccl" else ("cuda:0" if cuda else "cpu")
        spec = ChannelSpec("127.0.0.1", free_port(), 2, args.sync_backend)
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        proc = ctx.Process(
            target=_receiver, args=(os.path.join(root, "model"), spec.__dict__, device, args.sync_rounds, queue)
        )
        proc.start()
        ready, load_s = queue.get(timeout=900)
        out["engine_load_merged_s"] = round(load_s, 3)
        channel = open_channel(spec, 0)
        sends = []
        for _ in range(args.sync_rounds):
            t = time.perf_counter()
            stats = send(channel, gather(), policy.version)
            sends.append((time.perf_counter() - t, stats["broadcast_s"]))
        receives = queue.get(timeout=600)
        proc.join(timeout=60)
        out["broadcast_backend"] = args.sync_backend
        out["broadcast_total_s"] = round(statistics.median(s for s, _ in sends), 3)  # gather + send
        out["broadcast_send_s"] = round(statistics.median(b for _, b in sends), 3)
        out["engine_receive_s"] = round(statistics.median(receives), 3)
        out["broadcast_gb_per_s"] = round(out["bytes"] / 1e9 / out["broadcast_send_s"], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--preset", default="llama-0.5b", help="random-init shape from rl.models.RANDOM_PRESETS (ignored with --model)"
    )
    p.add_argument("--model", default=None, help="a local HF model directory instead of a random-init one")
    p.add_argument(
        "--vocab-size",
        type=int,
        default=SMOLLM2_VOCAB,
        help="vocabulary of the random-init model (a small one makes a CPU run of tiny-llama quick)",
    )
    p.add_argument("--finetune", nargs="+", choices=["lora", "full"], default=["lora", "full"])
    p.add_argument("--dtype", nargs="+", choices=["float32", "bfloat16"], default=["bfloat16"])
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument(
        "--group-size",
        type=int,
        default=0,
        help="GRPO-shaped batch: groups of this many rows share a --prompt-len prompt, completions of "
        "(seq-len - prompt-len) x [0.5, 1.5] tokens; 0: every row --seq-len random tokens",
    )
    p.add_argument(
        "--layout", nargs="+", choices=["auto", "packed", "padded", "prefix"], default=["auto"], help="policy.layout"
    )
    p.add_argument("--micro-batch-tokens", type=int, default=16384)
    p.add_argument("--chunk-tokens", type=int, default=2048)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--attn", default="sdpa")
    p.add_argument(
        "--glibc-defaults",
        action="store_true",
        help="on CPU, keep glibc's allocator defaults (the learner actor keeps freed memory: host_allocator.py)",
    )
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument(
        "--compile",
        action="store_true",
        help="policy.compile: torch.compile the decoder layers and the chunked log-softmax (our step only; "
        "first_step_s then includes the compile: use --warmup >= 1)",
    )
    p.add_argument("--algorithm", nargs="+", choices=["grpo", "ppo"], default=["grpo"])
    p.add_argument("--fsdp", action="store_true", help="FSDP2 ShardedPolicy (torchrun's group, or one of its own)")
    p.add_argument("--cpu-offload", action="store_true", help="FSDP2 CPU offload (with --fsdp)")
    p.add_argument("--sync", action="store_true", help="also time the full-weight sync paths into an hf engine")
    p.add_argument("--sync-backend", choices=["gloo", "nccl"], default="gloo")
    p.add_argument("--sync-rounds", type=int, default=3)
    p.add_argument(
        "--plain",
        action="store_true",
        help="also time the plain transformers + torch step on the same model and batch (the anchor)",
    )
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args(argv)
    if args.sync and int(os.environ.get("WORLD_SIZE", 1)) > 1:
        p.error("--sync measures one learner process against one engine process: run it without torchrun")
    if args.prompt_len >= args.seq_len:
        p.error("--prompt-len must be below --seq-len")
    if args.plain and int(os.environ.get("WORLD_SIZE", 1)) > 1:
        p.error("--plain is one process: run it without torchrun")
    if not args.glibc_defaults and resolve_device(args.device).type == "cpu":
        keep_freed_memory()  # as the learner actor does on CPU
    rank = 0
    if args.fsdp:
        from rl.learner.group import init_from_env

        rank, _ = init_from_env(args.device)
    if args.plain:
        for dtype in args.dtype:
            print(json.dumps(bench_plain(args, dtype)), flush=True)
    for finetune in args.finetune:
        for dtype in args.dtype:
            for algorithm in args.algorithm:
                for layout in args.layout:
                    result = bench_one(args, finetune, dtype, algorithm, layout)
                    if rank == 0:
                        print(json.dumps(result), flush=True)
    if args.fsdp:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
