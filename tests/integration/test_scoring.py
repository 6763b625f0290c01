"""generate_and_score with the hf engine (a tiny random Llama, rows in batches of two) and the local Evaluator
(Triton interpreter): with overlap a sample is sent to the evaluator while the engine still generates others;
without it, no evaluation is asked for before the engine's stream has ended, and every sample is still scored."""

from __future__ import annotations

import asyncio
import time

import pytest

from envs.evaluator import Evaluator
from envs.problems import resolve_problem
from envs.settings import EvalSettings
from rewards.shaping import RewardConfig
from rl.models import resolve_model
from rl.rollout.config import EngineConfig
from rl.rollout.hf_engine import HFEngine
from rl.scoring import generate_and_score
from rl.types import RolloutRequest, SamplingConfig

pytestmark = pytest.mark.integration


class StreamEnd:
    """The real engine, noting when its stream of samples ended."""

    def __init__(self, engine: HFEngine):
        self.engine, self.ended = engine, 0.0

    async def generate(self, requests):
        async for sample in self.engine.generate(requests):
            yield sample
        self.ended = time.perf_counter()


class AskedAt:
    """The real evaluator, noting when each evaluation was asked for."""

    def __init__(self, evaluator: Evaluator):
        self.evaluator, self.asked = evaluator, []

    async def evaluate_async(self, problem, answer, priority="train"):
        self.asked.append(time.perf_counter())
        return await self.evaluator.evaluate_async(problem, answer, priority)


@pytest.fixture(scope="module")
def parts():
    engine = HFEngine(
        resolve_model("random:tiny-llama"),
        EngineConfig(kind="hf", device="cpu", max_model_len=256, max_num_seqs=2, hf_decode="static"),
    )
    with Evaluator(EvalSettings(device="cpu")) as evaluator:
        yield engine, evaluator


@pytest.mark.parametrize("overlap", [True, False])
def test_evaluation_starts_during_generation_only_with_overlap(parts, overlap):
    engine, evaluator = StreamEnd(parts[0]), AskedAt(parts[1])
    problem = resolve_problem("L0_02_relu")
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=16)
    requests = [
        RolloutRequest(f"r{i}", problem.id, [{"role": "user", "content": "x" * (5 + i)}], sampling) for i in range(3)
    ]
    result = asyncio.run(
        generate_and_score(engine, requests, {problem.id: problem}, evaluator, RewardConfig(), overlap=overlap)
    )
    assert [len(g.samples) for g in result.groups] == [2, 2, 2] and len(evaluator.asked) == 6
    assert all(s.verdict.status for g in result.groups for s in g.samples)
    if overlap:  # three batches of two rows: the first batch's samples are judged while the next ones generate
        assert min(evaluator.asked) < engine.ended
    else:
        assert min(evaluator.asked) >= engine.ended
        assert result.evaluate_s <= result.wait_for_rewards_s
