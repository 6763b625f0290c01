"""rewards/integrations/ against the real service (scripts/serve_env.py, cpu): verl's compute_score, TRL's
GRPOTrainer (a real training step of a tiny random model on CPU) and a SkyRL-gym environment made through
skyrl_gym's own registry."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math

import pytest

from envs.verdict import Status
from rewards.integrations import KernelRewardScorer
from rewards.kernel_reward import reward_for_verdict
from tests.servers.kernelrl_service import ROOT

pytestmark = pytest.mark.integration

RELU = (ROOT / "envs/builtin/solutions/L0_02_relu.py").read_text()
WRONG = RELU.replace("tl.maximum(x, 0.0)", "tl.abs(x)")
MARKDOWN = f"Here is the kernel:\n```python\n{RELU}```"


def reward_at(delta: float) -> float:  # correct on CPU (no speedup): sigmoid(1 - delta)
    return 1 / (1 + math.exp(-(1 - delta)))


@pytest.fixture
def service_env(kernelrl_service, monkeypatch):
    monkeypatch.setenv("KERNELRL_SERVICE_URL", kernelrl_service.url)
    monkeypatch.setenv("KERNELRL_SERVICE_TOKEN", kernelrl_service.token)
    return kernelrl_service


# --- verl ---------------------------------------------------------------------------------------------
def _load_by_path():
    """The module as verl loads a custom reward function: from its file path, under another name."""
    path = ROOT / "rewards/integrations/verl_reward.py"
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verl_compute_score(service_env):
    verl = _load_by_path()
    assert verl.compute_score("kernelbench", MARKDOWN, "L0_02_relu") == pytest.approx(reward_at(1.8), abs=1e-6)
    # The id from extra_info, reward_kwargs from verl's config (delta), the problem pinned by its hash.
    from envs import resolve_problem

    sha = resolve_problem("L0_02_relu").sha256
    extra = {"problem_id": "L0_02_relu", "problem_sha256": sha, "index": 3}
    assert verl.compute_score("kernelbench", RELU, None, extra, delta=1.0) == pytest.approx(0.5, abs=1e-6)
    assert verl.compute_score("kernelbench", WRONG, json.dumps({"problem_id": "L0_02_relu"})) == 0.0
    assert asyncio.run(verl.compute_score_async("kernelbench", RELU, "L0_02_relu")) == pytest.approx(reward_at(1.8))
    from envs.service.client import RequestRejected

    with pytest.raises(RequestRejected, match="409"):
        verl.compute_score("kernelbench", RELU, {"problem_id": "L0_02_relu", "problem_sha256": "0" * 64})
    with pytest.raises(ValueError, match="no problem id"):
        verl.compute_score("kernelbench", RELU, "", {})


# --- TRL ------------------------------------------------------------------------------------------------
def test_trl_reward_signature(service_env):
    """The call GRPOTrainer makes: columns as keyword lists, plain or conversational completions."""
    from rewards.integrations.trl_reward import KernelRLReward

    reward = KernelRLReward(delta=1.0)
    logged, extra = {}, {}
    out = reward(
        prompts=["p"] * 3,
        completions=[
            MARKDOWN,
            [{"role": "assistant", "content": MARKDOWN}],
            [{"role": "assistant", "content": [{"type": "text", "text": WRONG}]}],
        ],
        completion_ids=[[1], [2], [3]],
        problem_id=["L0_02_relu"] * 3,
        trainer_state=None,
        log_metric=lambda k, v: logged.update({k: v}),
        log_extra=lambda k, v: extra.update({k: v}),
    )
    assert out == [pytest.approx(0.5, abs=1e-6)] * 2 + [0.0]
    assert logged == {"kernelrl/correct": pytest.approx(2 / 3)}
    assert extra == {"kernelrl_status": ["correct", "correct", "incorrect"]}
    # verl-style columns work too; a dataset without any problem column is a clear error.
    assert reward(["p"], [RELU], ground_truth=["L0_02_relu"]) == [pytest.approx(0.5, abs=1e-6)]
    with pytest.raises(KeyError, match="problem_id"):
        reward(["p"], [RELU], answer=["x"])


@pytest.mark.slow  # ~30 s on 2 CPU cores, most of it importing trl
def test_trl_grpo_trainer_step(service_env, tmp_path):
    """One real GRPOTrainer step (tiny random Llama, byte tokenizer, CPU) scored by the service. The random
    model writes bytes, not kernels, so every completion earns 0; what the test shows is the trainer calling the
    adapter with its real arguments, the adapter reaching the service for each completion, and the step
    finishing with the adapter's rewards in the trainer's logs."""
    trl = pytest.importorskip("trl", reason="pip install trl (the 'integrations' extra)")
    from datasets import Dataset

    from rewards.integrations.trl_reward import KernelRLReward
    from rl.learner.random_models import byte_tokenizer, tiny_llama

    tokenizer = byte_tokenizer()
    model = tiny_llama(vocab_size=len(tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    calls = []

    class Recording(KernelRLReward):
        def __call__(self, prompts, completions, **kwargs):
            out = super().__call__(prompts, completions, **kwargs)
            calls.append((list(prompts), list(completions), sorted(kwargs), out))
            return out

    reward = Recording(delta=1.8)
    reward.__name__ = "kernelrl"
    dataset = Dataset.from_list(
        [
            {"prompt": "Write a Triton ReLU kernel.", "problem_id": "L0_02_relu"},
            {"prompt": "Write a Triton sigmoid kernel.", "problem_id": "L0_04_sigmoid"},
        ]
    )
    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=[reward], args=config, train_dataset=dataset, processing_class=tokenizer
    )
    before = reward.scorer.client.stats.get("requests", 0)
    trainer.train()
    assert calls, "GRPOTrainer never called the reward function"
    prompts, completions, columns, rewards = calls[0]
    assert len(completions) == len(rewards) == 4 and all(isinstance(c, str) for c in completions)
    assert "problem_id" in columns and "trainer_state" in columns
    assert rewards == [0.0] * 4  # random bytes are no kernel: the service's verdict, rewarded by rewards/
    assert reward.scorer.client.stats["requests"] - before >= 4
    logged = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logged["rewards/kernelrl/mean"] == 0.0 and logged["kernelrl/correct"] == 0.0


# --- SkyRL ------------------------------------------------------------------------------------------------
def test_skyrl_env_through_skyrl_gym(service_env):
    skyrl_gym = pytest.importorskip("skyrl_gym", reason="pip install skyrl-gym (the 'integrations' extra)")
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    from rewards.integrations.skyrl_env import ENV_ID, KernelRLEnv, register

    register()
    register()  # idempotent
    row = {"reward_spec": {"method": "rule", "ground_truth": "L0_02_relu"}, "extra_info": {"index": 0}}
    env = skyrl_gym.make(ENV_ID, env_config={"max_turns": 2, "delta": 1.0}, extras=row)
    assert isinstance(env, KernelRLEnv) and isinstance(env, BaseTextEnv)
    prompt = [{"role": "user", "content": "Write a Triton ReLU kernel."}]
    assert env.init(prompt)[0] == prompt
    first = env.step(f"```python\n{WRONG}```")
    assert first["done"] is False and first["reward"] == 0.0 and first["metadata"]["status"] == "incorrect"
    assert first["observations"][0]["role"] == "user" and "incorrect" in first["observations"][0]["content"]
    second = env.step(MARKDOWN)
    assert second["done"] is True and second["observations"] == []
    assert second["reward"] == pytest.approx(0.5, abs=1e-6) and second["metadata"]["correct"] is True
    assert env.get_metrics() == {"correct": 1.0, "turns": 2, "reward": pytest.approx(0.5, abs=1e-6)}
    # One turn by default: the episode ends on the first answer, whatever it is.
    one = KernelRLEnv({}, {"reward_spec": {"ground_truth": "L0_02_relu"}}).step(WRONG)
    assert one["done"] is True and one["reward"] == 0.0


def test_scorer_reward_is_rewards_kernel_reward(service_env):
    """The adapters' reward is rewards/kernel_reward.py on the service's verdict, at the adapter's delta."""
    scorer = KernelRewardScorer(delta=0.5)
    scored = scorer.score("L0_02_relu", RELU)
    assert scored.verdict.status is Status.CORRECT
    assert scored.reward == reward_for_verdict(scored.verdict, 0.5) == pytest.approx(reward_at(0.5))
    scorer.close()
