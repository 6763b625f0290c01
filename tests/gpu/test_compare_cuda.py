"""The float32 pass of envs/compare.py on CUDA: the same verdicts, reports and largest difference as the
float64 path, with CUDA's own float32 arithmetic deciding which outputs are clearly inside."""

import pytest
import torch

from envs import compare
from tests.unit.test_compare import _near_bound_outputs, assert_same_as_float64

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_float32_pass_keeps_the_float64_verdicts(monkeypatch, dtype):
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1 << 16)
    g = torch.Generator().manual_seed(0)
    settled = 0
    for trial in range(24):
        atol, rtol = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0), (1e-3, 0.5)][trial % 4]
        ref = (torch.randn(1 << 18, generator=g) * 10.0 ** (trial % 5 - 2)).to(dtype)
        out = ref + (torch.randn(1 << 18, generator=g) * atol * 0.1).to(dtype)
        if trial % 2:
            idx = torch.randint(0, 1 << 18, (50,), generator=g)
            out[idx] = _near_bound_outputs(ref[idx], atol, rtol)
        settled += assert_same_as_float64(ref.cuda(), out.cuda(), atol, rtol)
    assert settled >= 10  # the clean trials took the float32 pass


def test_cuda_elements_float32_would_let_in_are_rejected():
    atol, rtol = 1e-4, 1e-4
    ref = (torch.rand(1 << 20, generator=torch.Generator().manual_seed(0)) * 0.1).cuda()
    out = _near_bound_outputs(ref.cpu(), atol, rtol).cuda()
    fooled = ((out.double() - ref.double()).abs() > atol + rtol * ref.double().abs()) & (
        (out - ref).abs() <= ref.abs() * rtol + atol
    )
    assert int(fooled.sum()) > 10
    assert compare.compare_outputs(ref[fooled], out[fooled])["mismatched"] == int(fooled.sum())
