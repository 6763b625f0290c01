"""Benchmark metrics (rl.bench.metrics) against hand-computed values."""

from __future__ import annotations

import math

import pytest

from envs.verdict import HackFinding, Status, TimingStats, Timings, Verdict
from rl.bench.metrics import (
    AttemptRecord,
    ProblemResult,
    flatten,
    geomean,
    pass_at_k,
    results_from_groups,
    speedup_vs,
    summarize,
    validation_metrics,
)
from rl.types import Group, Sample, ScoredSample


def _ms(x: float) -> TimingStats:
    return TimingStats(x, x, 0.0, x, x, x, x, 100)


def verdict(
    status: str = "correct",
    kernel: float | None = None,
    inductor: float | None = None,
    eager: float | None = None,
    hack: str | None = None,
) -> Verdict:
    timings = None
    if kernel is not None:
        timings = Timings(
            kernel=_ms(kernel), eager=_ms(eager) if eager else None, inductor=_ms(inductor) if inductor else None
        )
    speedup = inductor / kernel if kernel and inductor and status == "correct" else None
    return Verdict(
        Status(status),
        "p",
        "NVIDIA H200",
        timings=timings,
        speedup=speedup,
        baseline="inductor" if speedup else None,
        hack=HackFinding(hack, "why") if hack else None,
    )


def one(pid: str, v: Verdict, level: int | None = 1, **kw) -> ProblemResult:
    return ProblemResult(pid, level, (AttemptRecord(0, 0, v, **kw),))


def test_pass_at_k_hand_values():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_at_k(5, 2, 4) == 1.0  # n - c < k: every k-subset holds a correct sample
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(3, 3, 1) == 1.0
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_geomean_and_speedups_from_timings():
    assert geomean([2.0, 0.5, 4.0]) == pytest.approx(4.0 ** (1 / 3))
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    v = verdict(kernel=2.0, inductor=3.0, eager=5.0)
    assert speedup_vs(v, "inductor") == pytest.approx(1.5) and speedup_vs(v, "eager") == pytest.approx(2.5)
    assert speedup_vs(verdict("incorrect"), "eager") is None
    with pytest.raises(ValueError):
        speedup_vs(v, "cudnn")


def test_speedups_are_the_verdicts_own_rebased_like_the_environment():
    # re-anchored against inductor (1.4, not the medians' 1.5); eager through the anchor reference Inductor was
    # timed beside (6.0, not eager's back-to-back 5.0): 1.4 * 6 / 3
    timings = Timings(kernel=_ms(2.0), eager=_ms(5.0), inductor=_ms(3.0), anchor_reference=_ms(6.0))
    v = Verdict(Status("correct"), "p", "NVIDIA H200", timings=timings, speedup=1.4, baseline="inductor")
    assert speedup_vs(v, "inductor") == pytest.approx(1.4)
    assert speedup_vs(v, "eager") == pytest.approx(2.8)
    eager_only = Timings(kernel=_ms(2.0), eager=_ms(5.0))
    v = Verdict(Status("correct"), "p", "NVIDIA H200", timings=eager_only, speedup=2.4, baseline="eager")
    assert speedup_vs(v, "eager") == pytest.approx(2.4) and speedup_vs(v, "inductor") is None


def four_problems() -> list[ProblemResult]:
    return [
        one("A", verdict(kernel=1.0, inductor=2.0, eager=3.0), prompt_tokens=100, completion_tokens=50, cost_usd=0.01),
        one("B", verdict(kernel=2.0, inductor=1.0, eager=1.5), prompt_tokens=100, completion_tokens=30, cost_usd=0.03),
        one("C", verdict("incorrect"), level=2, prompt_tokens=100, completion_tokens=20),
        one("D", verdict(kernel=1.0, inductor=1.3, eager=1.0), level=2),
    ]


def test_fast_p_faster_than_and_geomeans_with_failures():
    s = summarize(four_problems())
    assert s["problems"] == 4 and s["correct_at_1"] == 0.75
    # speedups vs inductor: A 2.0, B 0.5, C failed, D 1.3; fast_p counts correct AND speedup > p (strictly)
    assert s["fast_p"] == {"0": 0.75, "1": 0.5, "1.2": 0.5, "1.5": 0.25, "2": 0.0}
    assert s["faster_than_inductor"] == 0.5
    assert s["faster_than_eager"] == 0.25  # A 3.0; B 0.75; D exactly 1.0 is not faster
    assert s["fast_p_eager"]["1"] == 0.25
    geo = s["geomean_speedup"]
    assert geo["correct"] == pytest.approx((2.0 * 0.5 * 1.3) ** (1 / 3))
    assert geo["all"] == pytest.approx((2.0 * 0.5 * 1.0 * 1.3) ** (1 / 4))  # the failure counts as 1.0
    assert geo["vs_eager"]["correct"] == pytest.approx((3.0 * 0.75 * 1.0) ** (1 / 3))
    assert s["status_mix"]["correct"] == 3 and s["status_mix"]["incorrect"] == 1
    assert s["tokens"] == {"prompt": 300, "completion": 100, "per_problem": 100.0, "completion_per_problem": 25.0}
    assert s["cost_usd"]["total"] == pytest.approx(0.04) and s["cost_usd"]["per_problem"] == pytest.approx(0.01)
    lv1, lv2 = s["per_level"]["1"], s["per_level"]["2"]
    assert lv1["problems"] == 2 and lv1["correct_at_1"] == 1.0 and lv1["fast_p"]["1"] == 0.5
    assert lv2["correct_at_1"] == 0.5 and lv2["geomean_speedup"]["all"] == pytest.approx(1.3**0.5)
    flat = flatten(s, "val")
    assert flat["val/fast_1"] == 0.5 and flat["val/level2/correct_at_1"] == 0.5
    assert flat["val/geomean_speedup_all"] == pytest.approx(1.3**0.25)


def test_cpu_runs_have_correctness_only():
    s = summarize([one("A", verdict()), one("B", verdict("compile_error")), one("C", verdict("hack", hack="x_cat"))])
    assert s["speedups_measured"] is False
    assert s["fast_p"]["0"] == pytest.approx(1 / 3)  # fast_0 = correctness rate
    assert all(v is None for p, v in s["fast_p"].items() if p != "0")
    assert s["faster_than_inductor"] is None and s["geomean_speedup"]["correct"] is None
    assert s["geomean_speedup"]["all"] is None
    assert s["hack_mix"] == {"x_cat": 1}
    assert math.isnan(flatten(s, "b")["b/fast_1"])


def test_refinement_and_samples():
    chain = ProblemResult(
        "R",
        0,
        (
            AttemptRecord(0, 0, verdict("incorrect")),
            AttemptRecord(0, 1, verdict("runtime_error")),
            AttemptRecord(0, 2, verdict(kernel=1.0, inductor=1.5)),
        ),
    )
    s = summarize([chain])
    assert s["correct_at_1"] == 0.0 and s["correct_within_attempts"] == 1.0
    assert s["fast_p"]["1"] == 1.0 and s["fast_p_at_1"]["1"] == 0.0  # the best attempt vs the first
    assert s["attempts"] == 3
    # 3 samples, samples 0 and 2 correct: pass@1 = 2/3, pass@2 = 1 - C(1,2)/C(3,2) = 1
    sampled = ProblemResult(
        "S",
        0,
        (
            AttemptRecord(0, 0, verdict(kernel=1.0, inductor=1.1)),
            AttemptRecord(1, 0, verdict("incorrect")),
            AttemptRecord(2, 0, verdict(kernel=1.0, inductor=3.0)),
        ),
    )
    failing = ProblemResult("F", 0, tuple(AttemptRecord(i, 0, verdict("incorrect")) for i in range(3)))
    s = summarize([sampled, failing])
    assert s["samples_per_problem"] == 3
    assert s["pass_at_k"] == {"1": pytest.approx((2 / 3 + 0) / 2), "2": pytest.approx(0.5), "3": pytest.approx(0.5)}
    assert s["correct_at_1"] == 0.5
    assert sampled.best().sample == 2  # the fastest correct sample is the problem's answer
    assert s["fast_p"]["2"] == 0.5


def test_validation_metrics_from_groups():
    def scored(i: int, v: Verdict) -> ScoredSample:
        sample = Sample("r", "L1_x", i, [1, 2, 3], [4] * (10 + i), "text", None, "stop", 1, 0.5)
        return ScoredSample(sample, v, 0.0)

    groups = [
        Group("r", "L1_x", [scored(0, verdict(kernel=1.0, inductor=2.0)), scored(1, verdict("incorrect"))]),
        Group("q", "L2_y", [scored(0, verdict("incorrect")), scored(1, verdict("incorrect"))]),
    ]
    results = results_from_groups(groups, {"L1_x": 1, "L2_y": 2})
    assert [r.problem_id for r in results] == ["L1_x", "L2_y"]
    assert results[0].attempts[1].completion_tokens == 11 and results[0].attempts[0].prompt_tokens == 3
    m = validation_metrics(groups, {"L1_x": 1, "L2_y": 2}, prefix="val/bench")
    assert m["val/bench/correct_at_1"] == 0.5 and m["val/bench/pass_at_2"] == 0.5
    assert m["val/bench/pass_at_1"] == pytest.approx(0.25)
    assert m["val/bench/fast_1"] == 0.5 and m["val/bench/level1/correct_at_1"] == 1.0
