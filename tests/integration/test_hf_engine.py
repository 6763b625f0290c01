"""The hf engine (transformers generate) on a tiny random Llama with SmolLM2's tokenizer: logprobs match a
forward pass, adapters and merged weights change outputs and the base restores them, the Ray actor path."""

from __future__ import annotations

import asyncio

import pytest
import torch

from rl.models import resolve_model
from rl.rollout.config import EngineConfig
from rl.rollout.hf_engine import HFEngine
from rl.rollout.synthetic import make_adapter, make_merged
from rl.types import RolloutRequest, SamplingConfig, WeightUpdate
from tests.rollout_fixtures import recompute_logprobs

pytestmark = pytest.mark.integration


def requests(sampling, tag="r", k=3):
    return [RolloutRequest(f"{tag}/{i}", f"p{i}", [{"role": "user", "content": "x" * (i * 7 + 1)}], sampling)
            for i in range(k)]


def collect(engine, reqs):
    async def run():
        return [s async for s in engine.generate(reqs)]
    return sorted(asyncio.run(run()), key=lambda s: (s.request_id, s.index))


@pytest.fixture(scope="module")
def model_dir():
    return resolve_model("random:tiny-llama")


@pytest.fixture(scope="module")
def engine(model_dir):
    return HFEngine(model_dir, EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=4))


def test_samples_and_logprobs_match_a_forward_pass(engine):
    sampling = SamplingConfig(n=3, temperature=0.7, max_tokens=12, seed=5)
    samples = collect(engine, requests(sampling))  # 9 rows in batches of 4 (left padding differs per batch)
    assert [(s.request_id, s.index) for s in samples] == [(f"r/{i}", j) for i in range(3) for j in range(3)]
    worst = 0.0
    for s in samples:
        assert len(s.logprobs) == len(s.completion_ids) > 0 and s.finish_reason in ("stop", "length")
        assert s.prompt_ids[-3:] == engine.tokenizer.encode("<|im_start|>assistant\n")[-3:]
        worst = max(worst, (recompute_logprobs(engine.model, s, 0.7) - torch.tensor(s.logprobs)).abs().max().item())
    assert worst < 1e-4
    again = collect(engine, requests(sampling))
    assert [s.completion_ids for s in again] == [s.completion_ids for s in samples]  # seeded: reproducible


def test_greedy_stops_at_eos_and_respects_max_tokens(engine):
    samples = collect(engine, requests(SamplingConfig(n=1, temperature=0.0, max_tokens=5)))
    for s in samples:
        eos = [i for i, t in enumerate(s.completion_ids) if t in engine.eos_ids]
        assert (s.finish_reason == "stop" and eos == [len(s.completion_ids) - 1]) or \
            (s.finish_reason == "length" and not eos and len(s.completion_ids) == 5)


def test_adapter_and_merged_updates_change_outputs_and_base_restores(engine, model_dir, tmp_path):
    greedy = SamplingConfig(n=1, temperature=0.0, max_tokens=10)
    base = [s.completion_ids for s in collect(engine, requests(greedy))]
    adapter = make_adapter(model_dir, tmp_path / "a", seed=1, scale=2.0)
    engine.update_weights(WeightUpdate(1, "lora", str(adapter)))
    adapted = collect(engine, requests(greedy))
    assert [s.completion_ids for s in adapted] != base and {s.policy_version for s in adapted} == {1}
    second = make_adapter(model_dir, tmp_path / "b", seed=2, scale=2.0)
    engine.update_weights(WeightUpdate(2, "lora", str(second)))  # replaces the first, does not stack on it
    engine.update_weights(WeightUpdate(3, "lora", str(adapter)))
    assert [s.completion_ids for s in collect(engine, requests(greedy))] == [s.completion_ids for s in adapted]
    merged = make_merged(model_dir, adapter, tmp_path / "m")
    engine.update_weights(WeightUpdate(4, "merged", str(merged)))
    assert [s.completion_ids for s in collect(engine, requests(greedy))] == [s.completion_ids for s in adapted]
    engine.update_weights(WeightUpdate(5, "merged", str(model_dir)))
    assert [s.completion_ids for s in collect(engine, requests(greedy))] == base


def test_stop_strings_and_oversized_prompts_are_refused(engine):
    with pytest.raises(ValueError, match="stop strings"):
        collect(engine, requests(SamplingConfig(n=1, stop=("```",))))
    long = [RolloutRequest("long", "p", [{"role": "user", "content": "word " * 600}], SamplingConfig(n=1))]
    with pytest.raises(ValueError, match="does not fit max_model_len=512"):
        collect(engine, long)


def test_ray_actor_streams_samples_from_the_hf_engine(model_dir):
    import ray

    from rl.rollout import make_engine

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False)
    try:
        eng = make_engine({"kind": "hf", "device": "cpu", "max_num_seqs": 2, "max_model_len": 512,
                           "num_engines": 2}, "random:tiny-llama")
        try:
            samples = collect(eng, requests(SamplingConfig(n=2, max_tokens=6, seed=1), k=4))
            assert len(samples) == 8 and all(s.logprobs for s in samples)
            assert eng.update_weights(WeightUpdate(1, "merged", str(model_dir))) > 0
            assert {s.policy_version for s in collect(eng, requests(SamplingConfig(n=1, max_tokens=3)))} == {1}
        finally:
            eng.shutdown()
    finally:
        if started_here:
            ray.shutdown()
