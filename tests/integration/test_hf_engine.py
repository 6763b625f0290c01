"""The hf engine on a tiny random Llama with SmolLM2's tokenizer, on each decode path (generate, static, and
compiled: torch.compile on the CPU, CUDA graphs are tests/gpu's): logprobs match a forward pass over prompt +
completion (teacher forcing), with top-p too; rows leave as they end; adapters and merged weights change outputs
and the base restores them, compiled graphs included; the Ray actor path."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from rl.models import resolve_model
from rl.rollout.config import EngineConfig
from rl.rollout.hf_decode import CHECK_EVERY, StaticDecoder
from rl.rollout.hf_engine import HFEngine
from rl.rollout.random_adapters import make_adapter, make_merged
from rl.types import RolloutRequest, SamplingConfig, WeightUpdate
from tests.rollout_fixtures import recompute_logprobs

pytestmark = pytest.mark.integration


def requests(sampling, tag="r", k=3):
    return [
        RolloutRequest(f"{tag}/{i}", f"p{i}", [{"role": "user", "content": "x" * (i * 7 + 1)}], sampling)
        for i in range(k)
    ]


def collect(engine, reqs):
    async def run():
        return [s async for s in engine.generate(reqs)]

    return sorted(asyncio.run(run()), key=lambda s: (s.request_id, s.index))


@pytest.fixture(scope="module")
def model_dir():
    return resolve_model("random:tiny-llama")


@pytest.fixture(scope="module", params=["generate", "static"])
def engine(model_dir, request):
    return HFEngine(
        model_dir, EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=4, hf_decode=request.param)
    )


def worst_logprob_error(engine, samples, temperature, top_p=1.0):
    """Largest |engine logprob - teacher-forced logprob| under logits / T, then transformers' own top-p."""
    from transformers import TopPLogitsWarper

    worst = 0.0
    for s in samples:
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        with torch.no_grad():
            scores = engine.model(ids).logits[0, len(s.prompt_ids) - 1 : -1].float() / temperature
        if top_p < 1:
            scores = TopPLogitsWarper(top_p)(None, scores)
        lp = scores.log_softmax(-1).gather(-1, torch.tensor(s.completion_ids)[:, None])[:, 0]
        worst = max(worst, (lp - torch.tensor(s.logprobs)).abs().max().item())
    return worst


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


def test_top_p_logprobs_are_those_of_the_truncated_distribution(engine):
    sampling = SamplingConfig(n=2, temperature=0.9, top_p=0.8, max_tokens=10, seed=3)
    samples = collect(engine, requests(sampling))
    assert len(samples) == 6 and worst_logprob_error(engine, samples, 0.9, 0.8) < 1e-4


def test_the_own_loop_samples_the_tokens_transformers_generate_samples(model_dir):
    """torch.multinomial draws one sample as argmax(p / Exp(1) noise) from the generator, which is how the own loop
    samples: with the same seed both paths give the same tokens (top-p too), batches of 4 and a filler-padded 1."""
    config = EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=4)
    paths = [HFEngine(model_dir, dataclasses.replace(config, hf_decode=d)) for d in ("generate", "static")]
    for sampling in (
        SamplingConfig(n=3, temperature=0.7, max_tokens=20, seed=5),
        SamplingConfig(n=3, temperature=0.9, top_p=0.8, max_tokens=20, seed=6),
    ):
        plain, own = ([s.completion_ids for s in collect(e, requests(sampling))] for e in paths)
        assert plain == own


def test_the_compiled_path_matches_the_static_one_and_serves_new_weights(model_dir, tmp_path):
    """torch.compile on the CPU (no CUDA graphs): the same tokens as the static loop, logprobs of a forward pass,
    and after an in-place weight load the graph computes with the new weights (no recompilation needed)."""
    config = EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=4)
    static = HFEngine(model_dir, dataclasses.replace(config, hf_decode="static"))
    compiled = HFEngine(model_dir, dataclasses.replace(config, hf_decode="compiled"))
    sampling = SamplingConfig(n=4, temperature=0.8, max_tokens=8, seed=11)  # one shape: one compilation
    reqs = requests(sampling, k=2)
    out = collect(compiled, reqs)
    assert [s.completion_ids for s in out] == [s.completion_ids for s in collect(static, reqs)]
    assert worst_logprob_error(compiled, out, 0.8) < 1e-4
    compilations = compiled_graphs()
    merged = make_merged(model_dir, make_adapter(model_dir, tmp_path / "a", seed=1, scale=2.0), tmp_path / "m")
    for eng in (static, compiled):
        eng.update_weights(WeightUpdate(1, "merged", str(merged)))
    after = collect(compiled, reqs)
    assert [s.completion_ids for s in after] != [s.completion_ids for s in out]
    assert [s.completion_ids for s in after] == [s.completion_ids for s in collect(static, reqs)]
    assert worst_logprob_error(compiled, after, 0.8) < 1e-4
    adapter = make_adapter(model_dir, tmp_path / "b", seed=2, scale=2.0)
    for eng in (static, compiled):
        eng.update_weights(WeightUpdate(2, "lora", str(adapter)))
    lora = collect(compiled, reqs)
    assert [s.completion_ids for s in lora] == [s.completion_ids for s in collect(static, reqs)]
    assert worst_logprob_error(compiled, lora, 0.8) < 1e-4 and {s.policy_version for s in lora} == {2}
    assert compiled_graphs() == compilations  # the same graphs served every version


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process (dynamo's frame counters stay empty in torch 2.13)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def test_warm_up_compiles_what_generate_then_runs_and_one_shape_more(model_dir):
    """After warm_up(requests), generating those requests compiles nothing, and neither does a batch of other
    rows and another cache length: the warm-up's extra shape made torch.compile's dynamic graph. The samples are
    those of the static loop, so the warm-up leaves no trace in them."""
    torch._dynamo.reset()  # this process may hold graphs from other tests: start from none (counters stay)
    before = compiled_graphs()
    config = EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=8)
    compiled = HFEngine(model_dir, dataclasses.replace(config, hf_decode="compiled"))
    static = HFEngine(model_dir, dataclasses.replace(config, hf_decode="static"))
    reqs = requests(SamplingConfig(n=4, temperature=0.8, max_tokens=40, seed=7), k=2)  # 8 rows, cache 256
    assert static.warm_up(reqs) == 0.0 and compiled_graphs() == before  # nothing to compile on the static loop
    assert compiled.warm_up(reqs) > 0
    warmed = compiled_graphs()
    assert warmed > before
    out = collect(compiled, reqs)
    assert compiled_graphs() == warmed
    assert [s.completion_ids for s in out] == [s.completion_ids for s in collect(static, reqs)]
    other = requests(SamplingConfig(n=1, temperature=0.8, max_tokens=300, seed=8), k=3)  # 3 rows -> 4, cache 512
    assert [s.completion_ids for s in collect(compiled, other)] == [s.completion_ids for s in collect(static, other)]
    assert compiled_graphs() == warmed
    assert dataclasses.replace(config, hf_decode="compiled", warm_up=False).warm_up is False


def test_rows_leave_the_decoder_as_they_end(engine):
    """With a tenth of the vocabulary counted as EOS, rows end at different steps: each is handed out at the
    first check after its EOS, not when the batch ends."""
    eos = list(range(0, engine.model.config.vocab_size, 10))
    decoder = StaticDecoder(engine.model, eos, engine.tokenizer.pad_token_id, compile=False, max_rows=8)
    prompts = [engine.tokenizer.encode("hello " * (i + 1)) for i in range(6)]
    chunks = list(decoder.run(prompts, 64, 1.0, 1.0, torch.Generator().manual_seed(0)))
    assert len(chunks) > 1 and sorted(r for c in chunks for r, _, _ in c) == list(range(6))
    for chunk in chunks:
        for _row, tokens, logprobs in chunk:
            assert len(tokens) == len(logprobs)
            ended = next((i for i, t in enumerate(tokens) if t in eos), None)
            if ended is None:
                assert len(tokens) == 64  # ran to the limit
            else:  # handed out at the first look after its EOS
                assert len(tokens) - CHECK_EVERY <= ended < len(tokens)


def test_samples_stream_out_in_the_order_rows_end(model_dir):
    engine = HFEngine(model_dir, EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=8))
    engine.eos_ids = list(range(0, engine.model.config.vocab_size, 20))
    engine._decoder.eos = torch.tensor(engine.eos_ids)

    async def arrivals():
        return [s async for s in engine.generate(requests(SamplingConfig(n=4, max_tokens=64, seed=2), k=2))]

    samples = asyncio.run(arrivals())
    ends = [-(-len(s.completion_ids) // CHECK_EVERY) for s in samples]  # the check each one left at
    assert ends == sorted(ends) and len(set(ends)) > 1
    assert [s.seconds for s in samples] == sorted(s.seconds for s in samples)

    async def first_only():  # a consumer that leaves early ends the batch; the engine stays usable
        async for s in engine.generate(requests(SamplingConfig(n=4, max_tokens=64, seed=2), k=2)):
            return s

    assert asyncio.run(first_only()).completion_ids == samples[0].completion_ids
    assert len(collect(engine, requests(SamplingConfig(n=1, max_tokens=4), k=2))) == 2


def test_greedy_stops_at_eos_and_respects_max_tokens(engine):
    samples = collect(engine, requests(SamplingConfig(n=1, temperature=0.0, max_tokens=5)))
    for s in samples:
        eos = [i for i, t in enumerate(s.completion_ids) if t in engine.eos_ids]
        assert (s.finish_reason == "stop" and eos == [len(s.completion_ids) - 1]) or (
            s.finish_reason == "length" and not eos and len(s.completion_ids) == 5
        )


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
        eng = make_engine(
            {"kind": "hf", "device": "cpu", "max_num_seqs": 2, "max_model_len": 512, "num_engines": 2},
            "random:tiny-llama",
        )
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


def test_the_wait_for_a_timing_window_is_reported_with_the_samples(model_dir, tmp_path):
    """The decode loop holds the GPU's gate shared between its looks (CPU here: the gate is a host-wide file
    lock either way); while an evaluation's timing window holds it, decoding waits, and the samples say how
    long (the loop logs it as time/generate_gate_wait)."""
    import threading

    from envs.gpu_lock import DeviceLock, GpuGate

    engine = HFEngine(model_dir, EngineConfig(kind="hf", device="cpu", max_model_len=512, max_num_seqs=8))
    engine._decoder.gate = GpuGate(0, tmp_path)
    window = DeviceLock(GpuGate(0, tmp_path))
    window.acquire("exclusive")
    threading.Timer(1.0, window.release, args=("exclusive",)).start()
    samples = collect(engine, requests(SamplingConfig(n=2, max_tokens=16, seed=3), k=2))
    waits = [s.usage["gpu_gate_wait_s"] for s in samples]
    assert 0.8 < max(waits) < 10, waits
    later = collect(engine, requests(SamplingConfig(n=2, max_tokens=16, seed=3), k=2))
    assert max(s.usage["gpu_gate_wait_s"] for s in later) < 0.5  # counted from each generate() call
