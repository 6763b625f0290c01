"""policy.compile on CPU (inductor's C++ backend) and CUDA: the compiled learner takes the eager learner's steps.

Compiled and eager Policy / ShardedPolicy (FSDP2 at world size 1, gloo or NCCL) on the same tiny random Llama and the
same batches: logprobs, gradients and step metrics agree to float32 rounding (inductor fuses and reorders the
elementwise work and reductions). Each test also checks that the option really compiled something (compiled layer
forwards, dynamo graphs counted), that new sequence lengths after the first step add no graphs (dynamic shapes),
and that state-dict names stay the plain transformers ones. Integration: each test compiles for about a minute.
"""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.compiled import is_compiled  # noqa: E402
from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.export import merged_state_dict  # noqa: E402
from rl.learner.logprobs import pack_rows  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402
from tests.integration.conftest import DEVICES  # noqa: E402  (CUDA: the same checks through Triton kernels)

pytestmark = pytest.mark.integration

VOCAB = 128
TOL = dict(rtol=1e-4, atol=1e-5)


def make_batch(seed: int, first_len: int) -> TrainBatch:
    """Six rows of six different lengths (first_len, first_len + 5, ...)."""
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, VOCAB, (first_len + 5 * i,), generator=g).tolist() for i in range(6)]
    return TrainBatch(
        input_ids=ids,
        prompt_lengths=[4] * 6,
        advantages=[1.0, -1.0] * 3,
        rollout_logprobs=[None] * 6,
        group_ids=["g"] * 6,
        policy_version=0,
        rewards=[1.0, 0.0] * 3,
    )


def policy_cfg(device: str, compile_: bool, finetune: str, gradient_checkpointing: bool) -> PolicyConfig:
    # a small token budget: several padded micro-batches of different shapes per step; small lm_head chunks
    return PolicyConfig(
        device=device,
        finetune=finetune,
        lora=LoraSettings(r=4, alpha=8),
        compile=compile_,
        gradient_checkpointing=gradient_checkpointing,
        optimizer=OptimizerSettings(lr=1e-3),
        micro_batch_tokens=64,
        logprob_chunk_tokens=16,
    )


def gradients(policy, batch: TrainBatch) -> dict[str, torch.Tensor]:
    """The gradients of sum(logprobs) + sum(entropy) over two rows of unequal length (padded, with a mask)."""
    policy.net.train()
    packed = pack_rows(batch.input_ids, batch.prompt_lengths, [0, 3], policy.device, policy.layout)
    logp, entropy, _ = policy._forward(packed)
    (logp.sum() + entropy.sum()).backward()
    grads = {}
    for name, p in policy.model.named_parameters():
        if p.grad is not None:
            g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad  # FSDP2: a DTensor
            grads[name] = g.detach().clone()
    policy.optimizer.zero_grad(set_to_none=True)
    return grads


def run(policy) -> dict:
    first, second = make_batch(1, 9), make_batch(2, 12)  # 12 different lengths in all
    out = {
        "logprobs": policy.logprobs(first.input_ids, first.prompt_lengths),
        "grads": gradients(policy, first),
        "step1": policy.train_step(first),
    }
    out["graphs_after_step1"] = _graphs()
    out["step2"] = policy.train_step(second)
    out["graphs_after_step2"] = _graphs()
    out["logprobs_after"] = policy.logprobs(second.input_ids, second.prompt_lengths)
    out["state_keys"] = list(policy.model.state_dict())
    return out


def _graphs() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def check_same(eager: dict, compiled: dict) -> None:
    for key in ("logprobs", "logprobs_after"):
        for a, b in zip(eager[key], compiled[key]):
            torch.testing.assert_close(torch.tensor(b), torch.tensor(a), **TOL)
    assert eager["grads"].keys() == compiled["grads"].keys() and eager["grads"]
    for name, g in eager["grads"].items():
        torch.testing.assert_close(compiled["grads"][name], g, **TOL, msg=name)
    for step in ("step1", "step2"):
        for metric in ("loss", "grad_norm", "entropy", "kl_ref", "ratio_mean", "values_mean", "value_grad_norm"):
            if metric in eager[step]:
                assert compiled[step][metric] == pytest.approx(eager[step][metric], rel=1e-4, abs=1e-6), metric
    # no `_orig_mod.` or other compile artefact in the names checkpoints and exports use
    assert compiled["state_keys"] == eager["state_keys"]


def check_compiled(policy, out: dict) -> None:
    assert all(is_compiled(layer.forward) for layer in policy.causal_lm.get_decoder().layers)
    assert policy.net.compiled
    assert out["graphs_after_step1"] > 0  # dynamo really captured graphs (the option does something)
    # the second step's six new lengths reuse the first step's graphs: no recompile per length
    assert out["graphs_after_step2"] == out["graphs_after_step1"]


@pytest.fixture
def fresh_dynamo():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # graphs of an earlier test would be reused and not counted
    counters.clear()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("device", DEVICES)
# CI compiles the LoRA case only; full fine-tuning and the sharded policy are slow (a minute or two each on CPU)
@pytest.mark.parametrize(
    "finetune,gradient_checkpointing", [pytest.param("full", False, marks=pytest.mark.slow), ("lora", True)]
)
def test_compiled_policy_takes_the_eager_steps(fresh_dynamo, device, finetune, gradient_checkpointing):
    algorithm = AlgorithmConfig(kl_coef=0.1)  # the reference pass too (a frozen copy / the adapter disabled)
    eager_policy = Policy(policy_cfg(device, False, finetune, gradient_checkpointing), algorithm, model=tiny_llama())
    eager = run(eager_policy)
    assert eager["graphs_after_step2"] == 0  # compile off: nothing compiled
    assert not any(is_compiled(layer.forward) for layer in eager_policy.causal_lm.get_decoder().layers)
    policy = Policy(policy_cfg(device, True, finetune, gradient_checkpointing), algorithm, model=tiny_llama())
    compiled = run(policy)
    check_compiled(policy, compiled)
    check_same(eager, compiled)
    lora = finetune == "lora"
    exported = merged_state_dict(policy.model, lora)
    assert exported.keys() == merged_state_dict(eager_policy.model, lora).keys()
    for name, value in merged_state_dict(eager_policy.model, lora).items():
        torch.testing.assert_close(exported[name], value, **TOL)


@pytest.mark.slow
def test_compiled_sharded_policy_takes_the_eager_steps(fresh_dynamo, group):
    from rl.learner.sharded import ShardedPolicy

    algorithm = AlgorithmConfig.from_mapping({"name": "ppo"})  # the value head and its scoring pass too
    eager_policy = ShardedPolicy(policy_cfg(group, False, "full", True), algorithm, model=tiny_llama())
    eager = run(eager_policy)
    policy = ShardedPolicy(policy_cfg(group, True, "full", True), algorithm, model=tiny_llama())
    compiled = run(policy)
    check_compiled(policy, compiled)
    check_same(eager, compiled)
    weights, eager_weights = policy.full_weights(), eager_policy.full_weights()  # what exports and broadcasts send
    assert weights.keys() == eager_weights.keys()
    for name, value in eager_weights.items():
        torch.testing.assert_close(weights[name], value, **TOL)
