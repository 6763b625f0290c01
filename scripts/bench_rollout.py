"""Rollout throughput through our engine (vLLM's AsyncLLM in a Ray actor, samples streamed out) against plain
vLLM with the same sampling on the same machine, the hf engine's decode paths, and weight-sync seconds.

Both sides get the same requests and seeds, so they generate the same tokens and tokens/s compare directly; each
mode runs in a fresh process and reports the median of `--repeats` passes after a warm-up. The modes: docs/rollout.md.

    python scripts/bench_rollout.py                          # SmolLM2 on CPU: plain, ours, ours with LoRA, sync
    python scripts/bench_rollout.py --modes plain ours --prompts 32 --n 8 --max-tokens 256 --out bench.json
    python scripts/bench_rollout.py --model random:qwen-1.5b --device cuda --prompts 64 --n 8   # on a GPU"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("plain", "plain_lora", "ours", "ours_lora", "hf", "hf_generate", "hf_static", "hf_compiled")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct", help="an rl.models spec")
    p.add_argument(
        "--random-weights",
        action="store_true",
        help="the model's architecture and tokenizer with random weights (seed 0); --model may then be "
        "a directory with config.json and the tokenizer only",
    )
    p.add_argument("--modes", nargs="+", default=["plain", "ours", "ours_lora"], choices=MODES)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=4, help="samples per prompt")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.add_argument("--compiled", action="store_true", help="enforce_eager=False (torch.compile; slow start)")
    p.add_argument(
        "--num-cpus",
        type=float,
        default=1.0,
        help="Ray CPUs of our engine actor (1, as rollout.engine.num_cpus in the loop: Ray sets the "
        "actor's OMP_NUM_THREADS from it, and 2 measured 12.6%% slower on 2 cores)",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sync-repeats", type=int, default=3)
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)  # internal: run one mode in this process
    p.add_argument("--adapter", help=argparse.SUPPRESS)
    p.add_argument("--merged", help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)  # what --model resolved to in the parent
    return p.parse_args(argv)


def engine_config(a: argparse.Namespace):
    from rl.rollout.config import EngineConfig

    return EngineConfig(
        kind="vllm",
        device=a.device,
        max_model_len=a.max_model_len,
        max_num_seqs=a.max_num_seqs,
        gpu_memory_utilization=a.gpu_memory_utilization,
        enforce_eager=not a.compiled,
        num_cpus=a.num_cpus,
        max_lora_rank=max(16, a.lora_rank),
    )


def make_requests(a: argparse.Namespace, tag: str):
    from rl.types import RolloutRequest, SamplingConfig

    if tag == "warmup":
        a = argparse.Namespace(**{**vars(a), "prompts": 1, "n": 1, "max_tokens": 8})
    topics = ["vector addition", "softmax", "layer norm", "matrix multiply", "ReLU", "a row sum", "GELU", "cumsum"]
    sampling = SamplingConfig(n=a.n, temperature=a.temperature, max_tokens=a.max_tokens, seed=1234)
    return [
        RolloutRequest(
            f"{tag}/{i}",
            f"bench{i}",
            [
                {
                    "role": "user",
                    "content": f"Write a Triton kernel for {topics[i % len(topics)]} (variant {i}) "
                    "and explain it briefly.",
                }
            ],
            sampling,
        )
        for i in range(a.prompts)
    ]


def run_plain(a: argparse.Namespace, lora: bool) -> dict:
    """Plain vLLM: LLM.generate over the same per-sample requests (same prompt ids, seeds, sampling)."""
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from rl.rollout.common import load_tokenizer, prompt_ids, sample_seed

    c = engine_config(a)
    model_dir = a.model_dir
    tok = load_tokenizer(model_dir)
    t0 = time.perf_counter()
    extra = dict(enable_lora=True, max_loras=1, max_cpu_loras=1, max_lora_rank=c.max_lora_rank) if lora else {}
    llm = LLM(
        model=model_dir,
        dtype=c.resolved_dtype(),
        max_model_len=c.max_model_len,
        gpu_memory_utilization=c.resolved_gpu_memory_utilization(),
        enforce_eager=c.enforce_eager,
        max_num_seqs=c.max_num_seqs,
        enable_prefix_caching=True,
        seed=0,
        logprobs_mode="processed_logprobs",
        disable_log_stats=True,
        **extra,
    )
    start = time.perf_counter() - t0
    lora_request = LoRARequest("policy", 1, a.adapter) if lora else None

    def one_pass(tag: str) -> tuple[float, int]:
        prompts, params = [], []
        for r in make_requests(a, tag):
            ids = prompt_ids(tok, r.messages)
            for i in range(r.sampling.n):
                prompts.append({"prompt_token_ids": ids})
                params.append(
                    SamplingParams(
                        n=1,
                        temperature=r.sampling.temperature,
                        top_p=r.sampling.top_p,
                        max_tokens=r.sampling.max_tokens,
                        logprobs=0,
                        seed=sample_seed(r.sampling.seed, r.request_id, i),
                    )
                )
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False, lora_request=lora_request)
        return time.perf_counter() - t, sum(len(o.outputs[0].token_ids) for o in outs)

    one_pass("warmup")
    passes = [one_pass("bench") for _ in range(a.repeats)]
    return summarize(start, passes)


def run_ours(a: argparse.Namespace, lora: bool) -> dict:
    import ray

    from rl.rollout.actor import RayRolloutEngine
    from rl.types import WeightUpdate

    ray.init(num_cpus=max(2, int(a.num_cpus)), include_dashboard=False)
    engine = RayRolloutEngine("vllm", a.model_dir, engine_config(a), enable_lora=lora)
    try:
        if lora:
            engine.update_weights(WeightUpdate(1, "lora", a.adapter))

        async def one_pass(tag: str) -> tuple[float, int, float]:
            t, tokens, first = time.perf_counter(), 0, None
            async for s in engine.generate(make_requests(a, tag)):
                first = first if first is not None else time.perf_counter() - t
                tokens += len(s.completion_ids)
            return time.perf_counter() - t, tokens, first

        asyncio.run(one_pass("warmup"))
        passes = [asyncio.run(one_pass("bench")) for _ in range(a.repeats)]
        result = summarize(engine.start_seconds, [(s, n) for s, n, _ in passes])
        result["first_sample_s"] = statistics.median(f for _, _, f in passes)
        # weight sync between steps, measured by the driver (load + prefix-cache reset on every engine)
        version = 1
        for kind, path in ([("lora", a.adapter)] if lora else []) + [("merged", a.merged)]:
            times = []
            for _ in range(a.sync_repeats):
                version += 1
                times.append(engine.update_weights(WeightUpdate(version, kind, path)))
            result[f"{kind}_sync_s"] = statistics.median(times)
            result[f"{kind}_sync_all_s"] = times
        return result
    finally:
        engine.shutdown()
        ray.shutdown()


def run_hf(a: argparse.Namespace, decode: str) -> dict:
    import torch

    from rl.rollout.hf_engine import HFEngine
    from rl.types import WeightUpdate

    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    engine = HFEngine(a.model_dir, dataclasses.replace(engine_config(a), kind="hf", hf_decode=decode))

    def one_pass(tag: str) -> tuple[float, int]:
        async def run() -> tuple[float, int]:
            t, tokens = time.perf_counter(), 0
            async for s in engine.generate(make_requests(a, tag)):
                tokens += len(s.completion_ids)
            return time.perf_counter() - t, tokens

        return asyncio.run(run())

    def peak_gib() -> float | None:
        return torch.cuda.max_memory_allocated() / 2**30 if cuda else None

    first_s, _ = one_pass("bench")  # the same shapes as the timed passes: compilation and graph recording
    first_peak = peak_gib()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result = summarize(engine.start_seconds, [one_pass("bench") for _ in range(a.repeats)])
    result.update(decode=engine.decode, first_call_s=first_s, first_call_peak_gib=first_peak, peak_gib=peak_gib())
    times = [engine.update_weights(WeightUpdate(v + 1, "merged", a.merged)) for v in range(a.sync_repeats)]
    result["merged_sync_s"] = statistics.median(times)
    return result


def summarize(start: float, passes: list[tuple[float, int]]) -> dict:
    seconds = statistics.median(s for s, _ in passes)
    tokens = statistics.median(n for _, n in passes)
    return {
        "engine_start_s": start,
        "pass_s": seconds,
        "tokens": tokens,
        "tok_per_s": tokens / seconds,
        "all_tok_per_s": [n / s for s, n in passes],
    }


def worker(a: argparse.Namespace) -> None:
    fn = {
        "plain": lambda: run_plain(a, False),
        "plain_lora": lambda: run_plain(a, True),
        "ours": lambda: run_ours(a, False),
        "ours_lora": lambda: run_ours(a, True),
        "hf": lambda: run_hf(a, "auto"),
        "hf_generate": lambda: run_hf(a, "generate"),
        "hf_static": lambda: run_hf(a, "static"),
        "hf_compiled": lambda: run_hf(a, "compiled"),
    }[a.worker]
    print("BENCH_RESULT " + json.dumps(fn()), flush=True)


def model_dir(a: argparse.Namespace, tmp: str) -> str:
    """--model resolved to a directory; with --random-weights, a copy of its architecture with random weights."""
    from rl.models import resolve_model

    if not a.random_weights:
        return str(resolve_model(a.model))
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = a.model if Path(a.model, "config.json").is_file() else str(resolve_model(a.model))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source), dtype=torch.float32)
    out = Path(tmp) / "model"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source).save_pretrained(out)
    return str(out)


def prepare_weights(model_dir: str, a: argparse.Namespace, tmp: str) -> tuple[str, str]:
    """An adapter with random B (so the LoRA path computes something) and the same adapter merged, written to
    /dev/shm when it exists (what the loop does: the merged reload then reads from memory)."""
    from rl.rollout.random_adapters import make_adapter, make_merged

    adapter = make_adapter(model_dir, Path(tmp) / "adapter", seed=0, scale=0.01, r=a.lora_rank)
    merged = make_merged(model_dir, adapter, Path(tmp) / "merged")
    return str(adapter), str(merged)


def main() -> None:
    a = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if a.worker:
        worker(a)
        return
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    results: dict = {
        "args": {k: v for k, v in vars(a).items() if k not in ("worker", "adapter", "merged", "model_dir")},
        "load_average": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="bench_rollout.", dir=shm) as tmp:
        model = model_dir(a, tmp)
        adapter, merged = prepare_weights(model, a, tmp)
        for mode in a.modes:
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                mode,
                "--adapter",
                adapter,
                "--merged",
                merged,
                "--model-dir",
                model,
                *sys.argv[1:],
            ]
            print(f"--- {mode}", file=sys.stderr, flush=True)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
            try:
                stdout, _ = proc.communicate()
            finally:  # interrupted: stop the mode's whole process group (vLLM's engine processes too)
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait()
            lines = [ln for ln in stdout.splitlines() if ln.startswith("BENCH_RESULT ")]
            if proc.returncode or not lines:
                print("\n".join(stdout.splitlines()[-40:]), file=sys.stderr)  # vLLM logs the root cause to stdout
                raise SystemExit(f"mode {mode} failed (exit {proc.returncode})")
            results[mode] = json.loads(lines[-1].removeprefix("BENCH_RESULT "))
            print(f"{mode}: {json.dumps(results[mode])}", file=sys.stderr, flush=True)
    for ours, plain in (("ours", "plain"), ("ours_lora", "plain_lora")):
        if ours in results and plain in results:
            results[f"{ours}_overhead"] = 1 - results[ours]["tok_per_s"] / results[plain]["tok_per_s"]
    for mode in ("hf", "hf_static", "hf_compiled"):
        if mode in results and "hf_generate" in results:
            results[f"{mode}_speedup"] = results[mode]["tok_per_s"] / results["hf_generate"]["tok_per_s"]
    if "ours" in results and "ours_lora" in results:
        results["lora_slowdown"] = 1 - results["ours_lora"]["tok_per_s"] / results["ours"]["tok_per_s"]
    results["load_average_end"] = os.getloadavg()
    print(json.dumps(results, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
