"""The validation interval (rl.metrics.wilson_interval), per-problem correct rates, and the summary's
per-problem first vs last steps (rl.loop.problem_summary)."""

import math

import pytest

from envs.verdict import Status, Verdict
from rl.loop import problem_summary
from rl.metrics import rollout_metrics, wilson_interval
from rl.types import Group, Sample, ScoredSample


@pytest.mark.parametrize("successes,n", [(3, 12), (0, 12), (12, 12), (1, 48), (17, 48), (250, 1000)])
def test_wilson_bounds_solve_the_score_equation(successes, n):
    """Each bound p0 of the Wilson interval is where the observed rate is z standard errors (at p0) away:
    |p - p0| = z * sqrt(p0 (1 - p0) / n), checked here without the closed form."""
    low, high = wilson_interval(successes, n)
    p, z = successes / n, 1.96
    assert 0.0 <= low <= p <= high <= 1.0
    for p0 in (low, high):
        if p0 in (0.0, 1.0) and p0 == p:  # the bound at an observed 0 or 1 is the rate itself
            continue
        assert abs(p - p0) == pytest.approx(z * math.sqrt(p0 * (1 - p0) / n), rel=1e-9)


def test_wilson_hand_values_and_edges():
    low, high = wilson_interval(3, 12)  # session 16's validation, 3 of 12
    assert low == pytest.approx(0.0889, abs=1e-4) and high == pytest.approx(0.5323, abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    narrow, wide = wilson_interval(12, 48), wilson_interval(3, 12)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]  # four times the samples, a narrower interval
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def _group(problem_id, statuses):
    samples = [
        ScoredSample(
            Sample(f"{problem_id}/0", problem_id, i, [1], [2], "t", None, "stop", 0),
            Verdict(status, problem_id, "cpu"),
            float(status is Status.CORRECT),
        )
        for i, status in enumerate(statuses)
    ]
    return Group(f"{problem_id}/0", problem_id, samples)


def test_rollout_metrics_interval_and_per_problem_rates():
    C, X = Status.CORRECT, Status.INCORRECT
    m = rollout_metrics(
        [_group("a", [C, C, X, X]), _group("b", [X, X, X, X]), _group("a", [C, X, X, X])], "val", max_tokens=16
    )
    assert m["val/correct_rate"] == pytest.approx(3 / 12)
    assert (m["val/correct_rate_low"], m["val/correct_rate_high"]) == wilson_interval(3, 12)
    assert m["val/problem/a/correct_rate"] == pytest.approx(3 / 8)  # both of a's groups
    assert m["val/problem/b/correct_rate"] == 0.0


def test_problem_summary_counts_the_problems_that_gained():
    def row(a, b, c=None):
        r = {"train/problem/a/correct_rate": a, "train/problem/b/correct_rate": b}
        if c is not None:
            r["train/problem/c/correct_rate"] = c
        return r

    train = [row(0.0, 0.5, 0.25), row(0.25, 0.5), row(0.5, 0.25), row(1.0, 0.5, 0.5)]
    out = problem_summary(train, k=2)
    assert out["train/problem/a/correct_rate_first2"] == pytest.approx(0.125)
    assert out["train/problem/a/correct_rate_last2"] == pytest.approx(0.75)
    assert out["train/problem/b/correct_rate_last2"] == pytest.approx(0.375)  # 0.5 -> 0.375: no gain
    # c was drawn at two steps only: its first and last two are over those
    assert out["train/problem/c/correct_rate_first2"] == out["train/problem/c/correct_rate_last2"] == 0.375
    assert out["train/problems_gained"] == 1 and out["train/problems_gained_ids"] == "a"
    assert problem_summary([{"train/correct_rate": 0.1}], k=1) == {}
