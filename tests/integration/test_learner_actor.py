"""The learner inside a real Ray actor: a step, an export, a checkpoint round trip."""

import os

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("ray")

from rl.learner.actor import LearnerActor  # noqa: E402
from rl.types import TrainBatch  # noqa: E402
from tests.integration.conftest import local_ray  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_local():
    with local_ray(num_cpus=2):
        yield


def test_the_learner_actor_trains_exports_and_resumes(tiny_llama_dir, ray_local, tmp_path):
    policy = {
        "model": tiny_llama_dir,
        "device": "auto",
        "lora": {"r": 4, "alpha": 8},
        "optimizer": {"lr": 1e-2},
        "actor": {"num_cpus": 1},
    }
    learner = LearnerActor.create(policy, {"name": "dapo"})
    assert learner.device == "cpu"
    ids = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 9, 10, 11]]
    batch = TrainBatch(
        input_ids=ids,
        prompt_lengths=[3, 3],
        advantages=[1.0, -1.0],
        rollout_logprobs=[None, None],
        group_ids=["g", "g"],
        policy_version=0,
    )
    before = learner.logprobs(ids, [3, 3])
    metrics = learner.train_step(batch)
    assert metrics["grad_norm"] > 0 and metrics["tokens"] == 14
    after = learner.logprobs(ids, [3, 3])
    assert sum(after[0]) > sum(before[0]) and sum(after[1]) < sum(before[1])

    update = learner.export_weights("merged", str(tmp_path / "merged"))
    assert update.version == 1 and os.path.isfile(os.path.join(update.path, "model.safetensors"))

    learner.save_checkpoint(str(tmp_path / "ckpt"), {"data_position": 2})
    learner.train_step(batch)
    assert learner.load_checkpoint(str(tmp_path / "ckpt")) == {"data_position": 2}
    assert learner.version == 1
    assert learner.logprobs(ids, [3, 3]) == after
    learner.shutdown()


def test_a_missing_model_fails_in_the_actor_with_the_reason(ray_local, tmp_path):
    with pytest.raises(RuntimeError, match="not a model directory"):
        LearnerActor.create({"model": str(tmp_path / "missing"), "actor": {"num_cpus": 1}}, {"name": "grpo"})
