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
