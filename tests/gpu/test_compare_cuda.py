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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_wrong_outputs_are_described_in_float32_as_in_float64(monkeypatch, dtype):
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1 << 16)
    g = torch.Generator().manual_seed(3)
    for trial in range(12):
        atol, rtol = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0), (1e-3, 0.5)][trial % 4]
        ref = (torch.randn(1 << 18, generator=g) * 10.0 ** (trial % 3 - 1)).to(dtype)
        wrong = [ref * 1.5, ref + torch.randn(1 << 18, generator=g).to(dtype), torch.zeros_like(ref)][trial % 3]
        idx = torch.randint(0, 1 << 18, (50,), generator=g)
        wrong[idx] = _near_bound_outputs(ref[idx], atol, rtol)
        r, o = ref.cuda(), wrong.cuda()
        assert compare._described_in_float32(r.shape, r, o, atol, rtol) is not None
        assert_same_as_float64(r, o, atol, rtol)


def test_cuda_elements_float32_would_let_in_are_rejected():
    atol, rtol = 1e-4, 1e-4
    ref = (torch.rand(1 << 20, generator=torch.Generator().manual_seed(0)) * 0.1).cuda()
    out = _near_bound_outputs(ref.cpu(), atol, rtol).cuda()
    fooled = ((out.double() - ref.double()).abs() > atol + rtol * ref.double().abs()) & (
        (out - ref).abs() <= ref.abs() * rtol + atol
    )
    assert int(fooled.sum()) > 10
    assert compare.compare_outputs(ref[fooled], out[fooled])["mismatched"] == int(fooled.sum())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_cuda_non_finite_outputs_fail_the_float32_pass_in_any_chunk(monkeypatch, bad):
    """The float32 pass tests the largest excess (amax): CUDA's reduction must carry a NaN or an infinity in a
    late chunk to the result, so the float64 path judges it."""
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1 << 16)
    ref = torch.randn(1 << 18, generator=torch.Generator().manual_seed(1)).cuda()
    out = ref.clone()
    out[(1 << 18) - 5] = bad
    assert compare._clearly_inside(ref, out, 1e-2, 1e-2) is None
    assert "NaN/Inf" in compare.compare_tensor(ref, out, 1e-2, 1e-2).mismatch["reason"]


@pytest.fixture
def fused():
    """The float32 kernel compiled as a worker compiles it at its start (envs/worker/harness.py)."""
    from envs import fused_compare

    fused_compare.prepare()
    return fused_compare


def test_cuda_fused_pass_gives_the_torch_pass_answers(fused):
    """On a GPU the float32 pass is one Triton kernel (envs/fused_compare.py): the same verdict and largest
    difference as the torch operations' pass, over many strides of its programs, on a view that starts off any
    alignment, and with a NaN in the last element."""
    g = torch.Generator(device="cuda").manual_seed(0)
    n = 3 * fused.MAX_PROGRAMS * fused.BLOCK + 5
    margin = compare._FLOAT32_MARGIN
    settled = 0
    for atol, rtol in [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0)]:
        base = torch.randn(n + 1, generator=g, device="cuda")
        ref = base[1:]  # 4 bytes past the allocation's alignment
        out = ref + torch.randn(n, generator=g, device="cuda") * atol * 0.3
        idx = torch.randint(0, n, (64,), generator=g, device="cuda")
        out[idx] = _near_bound_outputs(ref[idx].cpu(), atol, rtol).cuda()
        assert fused.eligible(ref, out)
        for o in (out, torch.cat([out[:-1], torch.tensor([float("nan")], device="cuda")])):
            want = compare._clearly_inside_in_chunks(ref, o, atol * margin, rtol * margin)
            got = compare._clearly_inside(ref, o, atol, rtol)
            assert (got is None) == (want is None), (atol, got, want)
            if got is not None:
                assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-9)
                settled += 1
    assert settled >= 1


def test_cuda_fused_pass_runs_its_prepared_binary_every_time_and_not_another(fused, monkeypatch):
    """Steady state: every launch runs the binary `prepare` compiled (else every output would fall to the float64
    path, three times slower); a launch that ran another (swapped in since) settles nothing."""
    from envs.antihack import runtime as guard

    ref = torch.randn(1 << 20, device="cuda")
    before = guard.identity_snapshot()
    for _ in range(3):
        assert fused.clearly_inside_fused(ref, ref.clone(), 1e-4, 1e-4) == (0.0, 0.0)
    guard.check_identities(before, "after three launches")  # Triton's own launches change nothing watched
    monkeypatch.setattr(fused, "_BINARY", object())
    assert fused.clearly_inside_fused(ref, ref.clone(), 1e-4, 1e-4) is None
