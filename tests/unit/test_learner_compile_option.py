"""policy.compile's wiring, without compiling (torch.compile is lazy): off by default, on installs compiled
layer forwards and the compiled log-softmax, state-dict names unchanged. The compiled steps themselves are
checked against eager ones in tests/integration/test_learner_compile.py."""

import pytest

pytest.importorskip("transformers")

from rl.learner.compiled import is_compiled  # noqa: E402
from rl.learner.config import AlgorithmConfig, PolicyConfig  # noqa: E402
from rl.learner.logprobs import chunk_bounds  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402


def layers_compiled(policy) -> list[bool]:
    return [is_compiled(layer.forward) for layer in policy.causal_lm.get_decoder().layers]


def test_compile_is_off_by_default_and_read_from_the_mapping():
    assert PolicyConfig().compile is False
    assert PolicyConfig.from_mapping({"compile": True}).compile is True


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_the_option_installs_compiled_forwards_and_keeps_the_names(finetune):
    algorithm = AlgorithmConfig(kl_coef=0.1)
    eager = Policy(PolicyConfig(device="cpu", finetune=finetune), algorithm, model=tiny_llama())
    compiled = Policy(PolicyConfig(device="cpu", finetune=finetune, compile=True), algorithm, model=tiny_llama())
    assert layers_compiled(eager) == [False, False] and not eager.net.compiled
    assert layers_compiled(compiled) == [True, True] and compiled.net.compiled
    if finetune == "full":  # the frozen KL reference is compiled too
        assert all(is_compiled(layer.forward) for layer in compiled.reference.model.layers)
        assert compiled.reference_net.compiled
    assert list(compiled.model.state_dict()) == list(eager.model.state_dict())
    assert not any("_orig_mod" in k for k in compiled.model.state_dict())


def test_no_lm_head_chunk_of_one_token():
    assert chunk_bounds(0, 4) == []
    assert chunk_bounds(1, 4) == [(0, 1)]  # a single target cannot be avoided
    assert chunk_bounds(8, 4) == [(0, 4), (4, 8)]
    assert chunk_bounds(9, 4) == [(0, 4), (4, 9)]
    assert chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
