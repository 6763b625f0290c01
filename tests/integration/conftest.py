"""Fixtures the integration tests share."""

import os

import pytest
import torch

# CPU always; CUDA where there is a GPU (the gpu marker: run on the device with -m gpu)
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA")])]


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
