"""Filling the CUDA caching allocator's free blocks: what an unwritten output contains is decided by the
evaluator, whichever free block the candidate's allocation is carved from."""

import pytest
import torch

from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack

pytestmark = pytest.mark.gpu
cuda = torch.device("cuda")


def test_free_blocks_are_poisoned_or_baited_whichever_block_is_reused():
    expected = torch.randn(1 << 20, device=cuda)
    kept = expected.cpu()
    # Leave a mix of free blocks behind: the "reference's" result among them, freed last.
    scratch = [torch.randn(n, device=cuda) for n in (1 << 18, 1 << 20, 1 << 21, 300)]
    leftover = expected.clone()
    del scratch, leftover
    free_before = sum(v.numel() for v in guard.free_cuda_blocks())
    assert free_before >= (1 << 20) * 4

    for shape in ((1 << 20,), (1 << 18,), (1000,)):
        # Again before each allocation: the check's own temporaries reuse (and overwrite) free blocks.
        guard.poison_free_memory([expected], cuda)
        with pytest.raises(RuntimeHack) as e:
            guard.check_unwritten([torch.empty(shape, device=cuda)])
        assert e.value.category == "stale_memory"

    guard.bait_free_memory([expected], cuda)
    assert torch.equal(torch.empty_like(expected), expected)
    assert torch.equal(expected.cpu(), kept)  # memory in use is never touched
