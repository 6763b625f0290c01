"""FSDP2 on a CUDA device at world size 1 (NCCL, no Ray): float32 equals the single-process Policy; bf16 mixed
precision trains (GRPO and PPO). Run on a GPU. The broadcast into an hf engine process is
tests/integration/test_weight_broadcast_process.py (CPU, and CUDA when there is one)."""

import os

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.config import AlgorithmConfig, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.integration,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture(scope="module")
def group():
    import torch.distributed as dist

    from rl.learner.group import init_from_env

    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    init_from_env("cuda")
    yield
    dist.destroy_process_group()


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(0, 128, (40 + 7 * i,), generator=g).tolist() for i in range(6)]
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=[8] * 6,
        advantages=[1.0, -1.0] * 3,
        rollout_logprobs=[None] * 6,
        group_ids=["g"] * 6,
        policy_version=0,
        rewards=[1.0, 0.0] * 3,
    )


def _cfg(dtype):
    return PolicyConfig(
        device="cuda",
        finetune="full",
        dtype=dtype,
        micro_batch_tokens=128,
        optimizer=OptimizerSettings(lr=1e-3, eps=1.0),
    )


def test_fsdp2_float32_step_equals_the_single_process_step(group):
    from rl.learner.sharded import ShardedPolicy

    want = Policy(_cfg("float32"), AlgorithmConfig(), model=tiny_llama()).train_step(_batch())
    got = ShardedPolicy(_cfg("float32"), AlgorithmConfig(), model=tiny_llama()).train_step(_batch())
    for key in ("loss", "grad_norm", "entropy"):
        assert abs(got[key] - want[key]) <= 1e-4 * max(1.0, abs(want[key])), key


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_fsdp2_bf16_mixed_precision_trains(group, algorithm):
    from rl.learner.sharded import ShardedPolicy

    policy = ShardedPolicy(_cfg("bfloat16"), AlgorithmConfig.from_mapping({"name": algorithm}), model=tiny_llama())
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())  # master weights stay float32
    first = policy.train_step(_batch())
    for _ in range(3):
        last = policy.train_step(_batch())
    assert torch.isfinite(torch.tensor(last["loss"])) and last["grad_norm"] > 0
    if algorithm == "ppo":
        assert last["value_error_sq"] < first["value_error_sq"]
