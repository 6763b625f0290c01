"""The float64-truth rule (envs/truth.py) on hand-made outputs: other summation orders pass, shortcuts fail."""

import pytest
import torch

from envs.compare import compare_outputs
from envs.truth import TRUTH_MULTIPLE, AccuracyLog, Float64Reference, check_against_truth, judge_outputs
from envs.verdict import Accuracy, ErrorStats, Status, Verdict


def sequential_fp32_cumsum(x: torch.Tensor) -> torch.Tensor:
    """A running sum rounded to float32 after every addition (how a one-thread-per-row scan rounds)."""
    out = torch.empty_like(x)
    acc = torch.zeros(x.shape[0], dtype=torch.float32)
    for j in range(x.shape[1]):
        acc = acc + x[:, j]
        out[:, j] = acc
    return out


def blocked_fp32_cumsum(x: torch.Tensor, block: int, accumulator=torch.float32) -> torch.Tensor:
    """Exactly rounded scan inside each block, plus a carry of block sums kept in `accumulator`."""
    out = torch.empty_like(x)
    carry = torch.zeros(x.shape[0], 1, dtype=accumulator)
    for s in range(0, x.shape[1], block):
        blk = x[:, s : s + block]
        out[:, s : s + block] = torch.cumsum(blk.double(), 1).float() + carry.float()
        carry = (carry.float() + blk.sum(1, keepdim=True)).to(accumulator)
    return out


@pytest.fixture(scope="module")
def scan():
    """Unscaled long rows: the fp32 reference (a sequential scan) is ~1e-3 off the exact sums."""
    torch.manual_seed(0)
    x = torch.randn(8, 8192) * 8
    return x, sequential_fp32_cumsum(x), torch.cumsum(x.double(), 1)


def truth_of(t):
    return lambda: (t, None)


def counted_truth(t):
    """A truth source that records each time it is asked: (the record, the source)."""
    calls = []

    def source():
        calls.append(1)
        return t, None

    return calls, source


def test_another_summation_order_fails_the_plain_check_and_passes_by_the_truth(scan):
    x, ref, truth = scan
    blocked = blocked_fp32_cumsum(x, 1024)
    assert compare_outputs(ref, blocked) is not None  # the reference's own rounding is not the truth
    j = judge_outputs(ref, blocked, None, truth_of(truth))
    assert j.passed and j.rule == "fp64_truth"
    assert j.candidate_vs_truth.max_abs < j.reference_vs_truth.max_abs  # the blocked scan is the closer one
    assert j.candidate_vs_reference.max_abs == pytest.approx(float((blocked.double() - ref.double()).abs().max()))


def test_fp16_accumulation_fails_by_the_truth_too(scan):
    x, ref, truth = scan
    shortcut = blocked_fp32_cumsum(x, 1024, accumulator=torch.float16)
    j = judge_outputs(ref, shortcut, None, truth_of(truth))
    assert not j.passed and j.rule == "fp64_truth"
    assert "float64 truth" in j.mismatch["reason"]
    assert j.candidate_vs_truth.rms > TRUTH_MULTIPLE * j.reference_vs_truth.rms


@pytest.mark.parametrize("damage", ["zeros", "half_rows", "last_tile_skipped", "fp16_inputs"])
def test_zero_partial_and_narrowed_outputs_fail(scan, damage):
    x, ref, truth = scan
    out = blocked_fp32_cumsum(x, 1024)
    if damage == "zeros":
        out = torch.zeros_like(out)
    elif damage == "half_rows":
        out[4:] = 0
    elif damage == "last_tile_skipped":
        out[:, -1024:] = out[:, -1025:-1024]
    else:
        out = blocked_fp32_cumsum(x.half().float(), 1024)
    assert not judge_outputs(ref, out, None, truth_of(truth)).passed


def test_errors_spread_everywhere_fail_the_normwise_bound(scan):
    """Each element within the elementwise slack (16x the reference's worst error), but every element that
    far off: on average far worse than the reference, which the normwise bound refuses."""
    _, ref, truth = scan
    slack = 0.9 * TRUTH_MULTIPLE * float((ref.double() - truth).abs().max())
    spread = (truth + slack * torch.where(torch.rand_like(truth) < 0.5, -1.0, 1.0)).float()
    j = judge_outputs(ref, spread, None, truth_of(truth))
    assert not j.passed and "rms error" in j.mismatch["reason"]


def test_the_truth_accepts_what_is_about_as_accurate_as_the_reference(scan):
    """Noise around the truth at the reference's own rms error passes; at 2K times it, it fails."""
    _, ref, truth = scan
    rms_ref = float((ref.double() - truth).square().mean().sqrt())
    torch.manual_seed(2)
    noise = torch.randn_like(truth)
    close = (truth + noise * rms_ref).float()
    far = (truth + noise * 2 * TRUTH_MULTIPLE * rms_ref).float()
    assert check_against_truth(ref, close, truth, 1e-4, 1e-4).passed
    assert not check_against_truth(ref, far, truth, 1e-4, 1e-4).passed
    # whatever the truth says, within the plain tolerance of the reference is accepted
    assert judge_outputs(ref, ref + 5e-5, None, truth_of(truth + 1e-3), mode="always").passed


def test_modes_decide_when_the_truth_is_computed(scan):
    x, ref, truth = scan
    calls, counted = counted_truth(truth)
    same = ref.clone()
    assert judge_outputs(ref, same, None, counted).passed and not calls  # on_mismatch: plain passed
    j = judge_outputs(ref, same, None, counted, mode="always")
    assert calls and j.passed and j.rule == "reference" and j.candidate_vs_truth is not None
    blocked = blocked_fp32_cumsum(x, 1024)
    calls.clear()
    assert not judge_outputs(ref, blocked, None, counted, mode="off").passed and not calls


def test_without_a_usable_truth_the_plain_rule_decides(scan):
    x, ref, truth = scan
    blocked = blocked_fp32_cumsum(x, 1024)
    j = judge_outputs(ref, blocked, None, lambda: (None, "no float64 truth: it does not fit"))
    assert not j.passed and j.rule == "reference" and j.note.endswith("does not fit")
    # a "truth" far from the reference on average is a reference that behaves differently in float64
    j = judge_outputs(ref, blocked, None, truth_of(truth + 1.0))
    assert not j.passed and j.rule == "reference" and "behaves differently" in j.note


def test_structure_nan_and_integer_outputs_never_reach_the_truth(scan):
    _, ref, truth = scan
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert "NaN" in judge_outputs(ref, nan, None, truth_of(truth)).mismatch["reason"]
    assert not judge_outputs(ref, ref[:, :10], None, truth_of(truth)).passed
    ints = torch.arange(10)
    j = judge_outputs((ref, ints), (ref.clone(), ints + 1), None, truth_of((truth, ints)))
    assert not j.passed and j.mismatch["output_index"] == 1


def test_atol_scales_widen_only_atol():
    ref = torch.full((10,), 1000.0)
    out = ref + 0.2  # 2e-4 relative: beyond atol + rtol * 1000 = 0.1001
    assert not judge_outputs(ref, out, None, None).passed
    assert judge_outputs(ref, out, None, None, atol_scales=[1001.0]).passed


class TinyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, n: int):
        return (x * self.w).sum(-1) + torch.tensor(0.5), torch.arange(n)


def test_float64_reference_upcasts_model_inputs_and_created_tensors():
    model = TinyModel()
    truth = Float64Reference(lambda: TinyModel().double().requires_grad_(False))
    x = torch.randn(3, 4)
    out, why = truth([x, 5])
    assert why is None and out[0].dtype == torch.float64 and out[1].dtype == torch.int64
    assert torch.get_default_dtype() == torch.float32  # restored
    assert model(x, 5)[0].dtype == torch.float32


def test_float64_reference_gives_up_with_a_reason():
    class Narrows(torch.nn.Module):
        def forward(self, x):
            return x.float() * 2

    class Fails(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("only float32")

    narrow = Float64Reference(lambda: Narrows())
    assert narrow([torch.randn(3)])[0] is None and "returns torch.float32" in narrow.unavailable
    releases = []
    fails = Float64Reference(lambda: Fails(), lambda: releases.append("released"))
    out, why = fails([torch.randn(3)])
    assert out is None and "only float32" in why and fails([torch.randn(3)]) == (None, why)  # once for all
    # the worker's release (which asks for a quiet period) is used before the run and after giving up
    assert releases == ["released", "released"]


def test_accuracy_log_reports_the_deciding_rule_and_round_trips_through_the_verdict(scan):
    x, ref, truth = scan
    log = AccuracyLog(["outliers"], "passed (16 sigma)")
    log.add(judge_outputs(ref, ref.clone(), None, truth_of(truth)), own_inputs=True)
    log.add(judge_outputs(ref, blocked_fp32_cumsum(x, 1024), None, truth_of(truth)), own_inputs=False)
    acc = log.accuracy()
    assert acc.rule == "fp64_truth" and acc.candidate_vs_reference == ErrorStats(0.0, 0.0)  # from own inputs
    assert acc.families == ["outliers"] and acc.truth_multiple == TRUTH_MULTIPLE
    v = Verdict(Status.CORRECT, "p", "cpu", accuracy=acc)
    assert Verdict.from_dict(v.to_dict()) == v
    shortcut = blocked_fp32_cumsum(x, 1024, accumulator=torch.float16)
    log.add(judge_outputs(ref, shortcut, None, truth_of(truth)), own_inputs=False)
    failed = log.accuracy()
    assert (
        failed.rule == "fp64_truth" and failed.candidate_vs_truth.rms > TRUTH_MULTIPLE * failed.reference_vs_truth.rms
    )
    with pytest.raises(ValueError):
        Accuracy.from_dict({"rule": "x", "candidate_vs_truth": {"max_abs": "a lot", "rms": 1}})


def test_an_output_too_far_for_any_truth_is_failed_without_running_it(scan):
    _, ref, truth = scan
    calls, counted = counted_truth(truth)
    j = judge_outputs(ref, torch.zeros_like(ref), None, counted)
    assert not j.passed and j.rule == "reference" and not calls
    assert "differ beyond" in j.mismatch["reason"] and j.note.startswith("float64 truth not run")
    assert not judge_outputs(ref, torch.zeros_like(ref), None, counted, mode="always").passed and calls


@pytest.mark.parametrize("rtol", [0.0, 1e-4, 0.3])
def test_no_truth_accepts_what_the_shortcut_calls_too_far(rtol):
    """The bound is a theorem about every truth: try the truths most favourable to the candidate, on the line
    from the reference to it, whose own distance from the reference is as large as rule 2 lets it be."""
    from envs.truth import _beyond_the_truth
    from envs.compare import compare_each

    atol, k = 1e-4, TRUTH_MULTIPLE
    torch.manual_seed(3)
    ref = torch.randn(4096).double()
    sign = torch.where(torch.rand(4096) < 0.5, -1.0, 1.0).double()
    tolerance = {"atol": atol, "rtol": rtol}
    for scale in (0.5, 0.9, 0.97, 1.01, 1.1, 3.0):  # 0.97: K instead of K + 1, or no atol, would call it far
        tol = (atol + rtol * float(ref.square().mean().sqrt())) / (1 - rtol)
        out = ref + sign * scale * ((k + 1) * tol + atol)
        plain = compare_each(ref, out, tolerance)
        too_far = _beyond_the_truth(ref, plain, tolerance, None, k) is not None
        accepted = [
            check_against_truth(ref, out, ref + beta * (out - ref), atol, rtol, k).passed
            for beta in torch.linspace(0.0, 0.2, 801).tolist()
        ]
        assert too_far == (scale > 1.0)
        if too_far:
            assert not any(accepted)
        elif rtol < 0.1 and scale == 0.9:
            assert any(accepted)  # close to the bound, some truth does accept: the bound is not loose


def test_the_shortcut_honours_rtol_one_the_atol_scales_and_each_output():
    from envs.compare import compare_each
    from envs.truth import _beyond_the_truth

    torch.manual_seed(4)
    ref = torch.randn(4096)
    far = ref + 1.0
    assert not judge_outputs(ref, far, {"atol": 1e-4, "rtol": 1.0}, truth_of(ref.double())).passed  # no 1/(1 - 1)
    near = ref + 0.05  # beyond any truth at atol 1e-4, within reach at 100x it (a family's scaled atol)
    assert _beyond_the_truth(ref, compare_each(ref, near), None, None, TRUTH_MULTIPLE) is not None
    assert _beyond_the_truth(ref, compare_each(ref, near, None, [100.0]), None, [100.0], TRUTH_MULTIPLE) is None
    calls, counted = counted_truth((ref, ref))
    j = judge_outputs((ref, ref), (ref.clone(), far), None, counted)
    assert not j.passed and not calls and j.mismatch["output_index"] == 1 and "output 1's" in j.note


def test_a_truth_whose_squares_overflow_float64_judges_nothing():
    """A reference that saturates at float32's largest value beside a float64 truth near 1e308: inf > inf is
    False and 16 x inf admits anything, so without the guard rule 2 accepted zeros."""
    x = torch.linspace(0.0, 1000.0, 1000)
    ref, truth = torch.nan_to_num(torch.exp(x)), torch.nan_to_num(torch.exp(x.double()))
    check = check_against_truth(ref, torch.zeros_like(ref), truth, 1e-4, 1e-4)
    assert not check.passed and "overflow" in check.note
    for mode in ("on_mismatch", "always"):
        assert not judge_outputs(ref, torch.zeros_like(ref), None, truth_of(truth), mode=mode).passed


def test_squares_that_underflow_leave_the_verdict_to_the_truth_as_before():
    ref, out = torch.zeros(1, dtype=torch.float64), torch.full((1,), 2.8e-162, dtype=torch.float64)
    exact = {"atol": 0.0, "rtol": 0.0}
    truth = truth_of(torch.full((1,), 1.4e-162, dtype=torch.float64))
    on_mismatch = judge_outputs(ref, out, exact, truth).passed
    assert on_mismatch == judge_outputs(ref, out, exact, truth, mode="always").passed
