"""The FSDP2 learner group on CPU: 2 real Ray actors over gloo against the single-process Policy on the same data.

Tolerance: the ranks sum their micro-batches' gradients in another order and reduce them over gloo, so float32
results differ in the last bits; weights after an AdamW step (a large eps makes the update proportional to the
gradient, so it does not amplify that noise: see tests/unit/test_learner.py) agree to 1e-5 relative.
"""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from rl.learner.config import AlgorithmConfig, PolicyConfig  # noqa: E402
from rl.learner.group import LearnerGroup  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.sharded import fsdp_available  # noqa: E402
from rl.types import TrainBatch  # noqa: E402
from tests.integration.conftest import TINY_VOCAB, local_ray  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not fsdp_available(), reason="no FSDP2 in this torch")]
VOCAB = TINY_VOCAB  # the model of tiny_llama_dir
RTOL = 1e-5


@pytest.fixture(scope="module")
def ray_local():
    with local_ray(num_cpus=3):
        yield


def make_batch(n=5, seed=3, masked=False):
    """`masked`: multi-turn rows as tool rollouts make them (a tool output between two policy turns is 0 in the
    loss mask), every other row unmasked (None)."""
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, VOCAB, (6 + 3 * i,), generator=g).tolist() for i in range(n)]  # unequal lengths
    rewards = [float(i % 2) for i in range(n)]
    masks = None
    if masked:
        masks = [[1, 1] + [0] * (len(row) - 4 - 4) + [1, 1] if i in (2, 4) else None for i, row in enumerate(ids)]
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=[4] * n,
        advantages=[r - 0.4 for r in rewards],
        rollout_logprobs=[None] * n,
        group_ids=["g"] * n,
        policy_version=0,
        rewards=rewards,
        loss_masks=masks,
    )


def policy_cfg(model_dir, finetune, world_size):
    return {
        "model": model_dir,
        "device": "cpu",
        "finetune": finetune,
        "lora": {"r": 4, "alpha": 8},
        "optimizer": {"lr": 1e-2, "eps": 1.0},
        "micro_batch_tokens": 24,
        "world_size": world_size,
        "actor": {"num_cpus": 1},
    }


def close(a, b):
    return abs(a - b) <= RTOL * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("algorithm,finetune,masked", [("grpo", "lora", False), ("ppo", "full", True)])
def test_two_ranks_take_the_same_step_as_one_process(tiny_llama_dir, ray_local, algorithm, finetune, masked, tmp_path):
    batch = make_batch(masked=masked)  # PPO with tool-output loss masks: GAE over policy tokens on every rank
    single = Policy(
        PolicyConfig.from_mapping(policy_cfg(tiny_llama_dir, finetune, 1)),
        AlgorithmConfig.from_mapping({"name": algorithm}),
    )
    group = LearnerGroup.create(policy_cfg(tiny_llama_dir, finetune, 2), {"name": algorithm})
    try:
        for _ in range(2):  # the second step starts from updated weights (and PPO from a trained value head)
            want, got = single.train_step(batch), group.train_step(batch)
            for key in ("loss", "pg_loss", "grad_norm", "entropy", "tokens") + (
                ("value_loss", "value_grad_norm", "values_mean") if algorithm == "ppo" else ()
            ):
                assert close(got[key], want[key]), (key, got[key], want[key])
            if masked:  # the masks took effect: the tool-output tokens are not counted
                assert want["completion_tokens"] == got["completion_tokens"] == 40 - 4 - 10
        want_lp = single.logprobs(batch.input_ids, batch.prompt_lengths)
        got_lp = group.logprobs(batch.input_ids, batch.prompt_lengths)
        diff = max(abs(a - b) for wr, gr in zip(want_lp, got_lp) for a, b in zip(wr, gr))
        assert diff < 1e-4, diff
        # the merged export gathers the shards: the same serving weights as the single process's export
        from safetensors.torch import load_file

        group.export_weights("merged", str(tmp_path / "group"))
        single.export_weights("merged", str(tmp_path / "single"))
        a, b = (
            load_file(str(tmp_path / "group" / "model.safetensors")),
            load_file(str(tmp_path / "single" / "model.safetensors")),
        )
        assert set(a) == set(b)
        assert all(torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-6) for k in a)
    finally:
        group.shutdown()


def test_a_checkpoint_of_two_ranks_resumes_in_one_process(tiny_llama_dir, ray_local, tmp_path):
    batch = make_batch(seed=5)
    group = LearnerGroup.create(policy_cfg(tiny_llama_dir, "lora", 2), {"name": "ppo"})
    try:
        group.train_step(batch)
        group.save_checkpoint(str(tmp_path / "ckpt"), {"step": 1})
        want = group.train_step(batch)  # the uninterrupted run's second step
        want_lp = group.logprobs(batch.input_ids, batch.prompt_lengths)
    finally:
        group.shutdown()
    resumed = Policy(
        PolicyConfig.from_mapping(policy_cfg(tiny_llama_dir, "lora", 1)), AlgorithmConfig.from_mapping({"name": "ppo"})
    )
    assert resumed.load_checkpoint(str(tmp_path / "ckpt")) == {"step": 1}
    assert resumed.version == 1 and resumed.optimizer_steps == 1
    got = resumed.train_step(batch)  # AdamW moments and the value head came back: the same second step
    for key in ("loss", "grad_norm", "value_loss", "value_grad_norm"):
        assert close(got[key], want[key]), (key, got[key], want[key])
    got_lp = resumed.logprobs(batch.input_ids, batch.prompt_lengths)
    assert max(abs(a - b) for wr, gr in zip(want_lp, got_lp) for a, b in zip(wr, gr)) < 1e-4
