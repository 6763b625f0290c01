import pytest
import torch

from envs.compare import ReferenceNotFinite, compare_outputs, format_mismatch, tolerance_for


def test_equal_outputs_match():
    x = torch.randn(100, 7)
    assert compare_outputs(x, x.clone()) is None
    assert compare_outputs((x, x * 2), [x.clone(), x * 2]) is None


def test_fp32_default_tolerance_boundary():
    ref = torch.ones(10)
    assert compare_outputs(ref, ref + 1.9e-4) is None  # atol + rtol * 1 = 2e-4
    m = compare_outputs(ref, ref + 3e-4)
    assert m["mismatched"] == 10 and m["max_abs_diff"] == pytest.approx(3e-4, rel=1e-3)


def test_dtype_aware_defaults_and_override():
    assert tolerance_for(torch.float32) == (1e-4, 1e-4)
    assert tolerance_for(torch.float16) == (1e-2, 1e-2)
    assert tolerance_for(torch.bfloat16) == (2e-2, 2e-2)
    assert tolerance_for(torch.int64) == (0.0, 0.0)
    assert tolerance_for(torch.float32, {"atol": 1e-3}) == (1e-3, 1e-4)
    ref = torch.ones(4)
    assert compare_outputs(ref, ref + 5e-4, {"atol": 1e-3}) is None


def test_shape_and_dtype_must_match():
    x = torch.randn(4, 4)
    assert "shape mismatch" in compare_outputs(x, x.reshape(16))["reason"]
    assert "dtype mismatch" in compare_outputs(x, x.double())["reason"]
    assert "expected 2 output" in compare_outputs((x, x), x)["reason"]
    assert "got int" in compare_outputs(x, 3)["reason"]


def test_nan_and_inf_never_pass():
    ref = torch.zeros(8)
    out = ref.clone()
    out[3] = float("nan")
    m = compare_outputs(ref, out)
    assert "NaN/Inf" in m["reason"] and m["index"] == [3]
    out[3] = float("inf")
    assert compare_outputs(ref, out) is not None
    # even with a huge tolerance
    assert compare_outputs(ref, out, {"atol": 1e30, "rtol": 1e30}) is not None


def test_non_finite_reference_is_a_problem_error():
    ref = torch.tensor([1.0, float("nan")])
    with pytest.raises(ReferenceNotFinite):
        compare_outputs(ref, ref.clone())


def test_mismatch_report_says_where_and_by_how_much():
    ref = torch.zeros(3, 5)
    out = ref.clone()
    out[2, 4] = 0.5
    m = compare_outputs(ref, out)
    assert m["worst_index"] == [2, 4] and m["value"] == 0.5 and m["expected"] == 0.0
    text = format_mismatch(m)
    assert "1 of 15" in text and "[2, 4]" in text and "max abs diff 0.5" in text


def test_integer_outputs_are_exact():
    ref = torch.arange(10)
    assert compare_outputs(ref, ref.clone()) is None
    assert compare_outputs(ref, ref + 1) is not None


def _near_bound_outputs(ref: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Outputs whose float32 neighbours straddle each element's bound, on both sides of the reference."""
    bound = atol + rtol * ref.double().abs()
    sign = torch.where(torch.arange(ref.numel()) % 2 == 0, 1.0, -1.0).double().reshape(ref.shape)
    out = (ref.double() + sign * bound).to(ref.dtype)
    step = torch.randint(-2, 3, ref.shape, generator=torch.Generator().manual_seed(1))
    for k in (-2, -1, 1, 2):
        toward = torch.full_like(out, float("inf") if k > 0 else float("-inf"))
        moved = torch.nextafter(out, toward) if k in (-1, 1) else torch.nextafter(torch.nextafter(out, toward), toward)
        out = torch.where(step == k, moved, out)
    return out


def assert_same_as_float64(ref: torch.Tensor, out: torch.Tensor, atol: float, rtol: float) -> bool:
    """compare_tensor's result is the float64 path's: verdict, report and maximum exactly, rms to float32's
    rounding of the differences, the largest relative difference to float32's rounding of the quotient. True
    where the float32 pass settled it."""
    from envs import compare

    got = compare.compare_tensor(ref, out, atol, rtol)
    want = compare._compare_float64(ref, ref.reshape(-1), out.reshape(-1), atol, rtol)
    if got.mismatch and want.mismatch and "max_rel_diff" in want.mismatch:
        # the float32 description's, where thousands of elements tie for it: float32's quotient
        assert got.mismatch.pop("max_rel_diff") == pytest.approx(want.mismatch.pop("max_rel_diff"), rel=2.0**-20)
    assert got.mismatch == want.mismatch
    assert got.max_abs == want.max_abs  # exact, not approximately
    assert got.rms == pytest.approx(want.rms, rel=1e-6, abs=1e-30)  # float32 differences, squared in float64
    return compare._clearly_inside(ref.reshape(-1), out.reshape(-1), atol, rtol) is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_float32_pass_keeps_every_verdict_and_report_of_the_float64_path(monkeypatch, dtype):
    from envs import compare

    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1000)  # several chunks: a late one decides
    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        atol, rtol = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0), (1e-3, 0.5)][trial % 4]
        ref = (torch.randn(4000, generator=g) * 10.0 ** (trial % 5 - 2)).to(dtype)
        out = ref + (torch.randn(4000, generator=g) * atol * 0.3).to(dtype)
        if trial % 3 == 1:  # a few elements at their bound, rounding either way
            idx = torch.randint(0, 4000, (5,), generator=g)
            out[idx] = _near_bound_outputs(ref[idx], atol, rtol)
        if trial % 3 == 2:  # one clear miss in the last chunk
            out[3999] = ref[3999] + 100 * (atol + rtol * abs(float(ref[3999])))
        assert_same_as_float64(ref, out, atol, rtol)


@pytest.mark.parametrize("atol, rtol, scale", [(1e-4, 1e-4, 0.1), (1e-6, 1e-3, 100.0)])  # atol's, rtol's share
def test_an_element_that_float32_rounding_would_let_in_is_judged_in_float64(atol, rtol, scale):
    # Outputs just beyond atol + rtol*|ref| in exact arithmetic that float32's own rounding of the
    # difference and the bound would call inside: the margin sends them to the float64 path.
    tolerance = {"atol": atol, "rtol": rtol}
    ref = torch.rand(1_000_000, generator=torch.Generator().manual_seed(0)) * scale
    out = _near_bound_outputs(ref, atol, rtol)
    exact_outside = (out.double() - ref.double()).abs() > atol + rtol * ref.double().abs()
    float32_inside = torch.sub((out - ref).abs(), ref.abs(), alpha=rtol) <= atol  # the pass's test, no margin
    fooled = exact_outside & float32_inside
    assert int(fooled.sum()) > 10  # the case exists: without the margin the pass would accept these
    m = compare_outputs(ref[fooled], out[fooled], tolerance)
    assert m is not None and m["mismatched"] == int(fooled.sum())
    for r, o in zip(ref[fooled][:200], out[fooled][:200]):  # each alone: no other element sends it to float64
        assert compare_outputs(r.reshape(1), o.reshape(1), tolerance) is not None


def test_large_values_and_tolerances_outside_the_float32_range_keep_their_verdicts():
    ref = torch.tensor([3.0e38, -3.0e38, 1.0])
    assert compare_outputs(ref, ref.clone()) is None
    out = ref.clone()
    out[1] = 3.0e38  # the difference overflows float32
    assert compare_outputs(ref, out)["mismatched"] == 1
    assert compare_outputs(ref, out, {"atol": 1e39, "rtol": 2.0}) is None  # float64 alone decides
    exact = {"atol": 0.0, "rtol": 0.0}
    assert compare_outputs(torch.ones(3), torch.ones(3), exact) is None
    assert compare_outputs(torch.ones(3), torch.nextafter(torch.ones(3), torch.zeros(3)), exact)["mismatched"] == 3


def test_outputs_clearly_inside_their_bounds_are_settled_without_float64(monkeypatch):
    from envs import compare

    def float64_path(*args):
        raise AssertionError("the float64 path ran")

    monkeypatch.setattr(compare, "_compare_float64", float64_path)
    ref = torch.randn(5000)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        r = ref.to(dtype)
        result = compare.compare_tensor(r, r + torch.full_like(r, 1e-5), *compare.tolerance_for(dtype))
        assert result.mismatch is None and result.max_abs > 0


def test_the_largest_difference_is_reported_exactly_where_float32_rounds_it():
    from envs import compare

    g = torch.Generator().manual_seed(3)
    ref = torch.rand(1000, generator=g) * 1e-3
    out = -torch.rand(1000, generator=g) * 1e-3  # opposite signs: float32 rounds most differences
    exact = (out.double() - ref.double()).abs().max()
    assert float((out - ref).abs().max()) != float(exact)
    assert compare.compare_tensor(ref, out, 1e-2, 0.0).max_abs == float(exact)


def test_the_float32_pass_leaves_every_edge_to_the_float64_path():
    with pytest.raises(ReferenceNotFinite):  # an infinite reference with a finite output
        compare_outputs(torch.tensor([float("inf"), 1.0]), torch.tensor([1.0, 1.0]))
    # float64 outputs 0.01% beyond their bound that float32 rounding would put inside
    r = torch.rand(100_000, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) + 0.5
    o = r + (1e-4 + 1e-4 * r) * 1.0001
    shrunk = 1e-4 * (1 - 2.0**-20)  # inside even the float32 pass's shrunk bound once rounded to float32
    fooled = (o.float() - r.float()).abs() <= r.float() * shrunk + shrunk
    assert int(fooled.sum()) > 0 and compare_outputs(r[fooled], o[fooled], {"atol": 1e-4, "rtol": 1e-4}) is not None
    # no atol: subnormal references, whose float32 bound rounds to multiples of the smallest subnormal
    r = torch.tensor([16 * 2.0**-149])
    assert compare_outputs(r, r + torch.tensor([2 * 2.0**-149]), {"atol": 0.0, "rtol": 0.1}) is not None


def test_complex_outputs_compare_their_real_and_imaginary_parts():
    r = torch.randn(64, dtype=torch.complex64)
    assert compare_outputs(r, r + 5j)["mismatched"] == 64  # float64 casts dropped the imaginary part
    assert compare_outputs(r, r + (1e-6 + 1e-6j)) is None  # within float32's tolerance per part
    assert compare_outputs(r, r.conj().conj()) is None  # a conjugate view, resolved


def test_outputs_match_gives_compare_outputs_answer(monkeypatch):
    from envs import compare

    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1000)
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(4000, generator=g)
    cases = [ref.clone(), ref + 1e-6, ref * 1.5, torch.zeros_like(ref), ref.double(), ref[:10]]
    late = ref.clone()
    late[3999] += 1.0  # only the last chunk misses
    near = ref.clone()
    near[2500] = _near_bound_outputs(ref[2500:2501], 1e-4, 1e-4)[0]  # at float32's default bound
    for out in [*cases, late, near]:
        assert compare.outputs_match(ref, out) == (compare.compare_outputs(ref, out) is None)
    assert compare.outputs_match((ref, 3), (ref.clone(), 3)) and not compare.outputs_match((ref, 3), (ref, 4))


def test_outputs_match_stops_at_the_first_chunk_that_misses(monkeypatch):
    from envs import compare

    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1000)
    ref = torch.randn(4000)
    ref[3500] = float("nan")  # a later chunk the full comparison would reach and refuse
    out = ref * 1.5
    with pytest.raises(ReferenceNotFinite):
        compare_outputs(ref, out)
    assert not compare.outputs_match(ref, out)
    [first] = compare.compare_each(ref, out, first_only=True)
    assert "judging stopped there" in first.mismatch["reason"] and first.mismatch["total"] == 4000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_wrong_output_is_described_in_float32_as_the_float64_path_describes_it(monkeypatch, dtype):
    from envs import compare

    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 1000)  # several chunks: maxima and counts across them
    g = torch.Generator().manual_seed(2)
    wrongs = [
        lambda r: r * 1.5,  # wrong everywhere
        lambda r: r + 3.0 * torch.randn(r.shape, generator=g).to(r.dtype),
        lambda r: torch.zeros_like(r),
        lambda r: torch.where(torch.arange(r.numel()) % 7 == 0, r + 1.0, r),  # a seventh wrong
        lambda r: torch.full_like(r, 0.25),  # equal differences: ties for every maximum
        lambda r: r.flip(0),
    ]
    described = 0
    for trial in range(48):
        atol, rtol = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0), (1e-3, 0.5)][trial % 4]
        ref = (torch.randn(3500, generator=g) * 10.0 ** (trial % 5 - 2)).to(dtype)
        out = wrongs[trial % len(wrongs)](ref).to(dtype)
        if trial % 3 == 1:  # some elements at their bound, rounding either way, beside the misses
            idx = torch.randint(0, 3500, (40,), generator=g)
            out[idx] = _near_bound_outputs(ref[idx], atol, rtol)
        assert_same_as_float64(ref, out, atol, rtol)
        r32, o32 = ref.reshape(-1), out.reshape(-1)
        described += compare._described_in_float32(ref.shape, r32, o32, atol, rtol) is not None
    assert described == 48  # every one of them by the float32 description, none left to the float64 path


def test_non_finite_values_leave_the_description_to_the_float64_path():
    from envs import compare

    ref = torch.randn(100)
    for bad in (float("nan"), float("inf")):
        out = ref * 1.5
        out[40] = bad
        assert compare._described_in_float32(ref.shape, ref, out, 1e-4, 1e-4) is None
        assert "NaN/Inf" in compare.compare_outputs(ref, out)["reason"]
        broken = ref.clone()
        broken[60] = bad
        assert compare._described_in_float32(ref.shape, broken, ref * 1.5, 1e-4, 1e-4) is None
        with pytest.raises(ReferenceNotFinite):
            compare.compare_outputs(broken, ref * 1.5)
