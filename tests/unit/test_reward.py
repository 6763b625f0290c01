import math

import pytest

from envs.verdict import HackFinding, Status, Verdict
from rewards import DEFAULT_DELTA, kernel_reward, reward_for_verdict


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_failure_earns_nothing():
    assert kernel_reward(False, 5.0) == 0.0
    assert kernel_reward(False, None) == 0.0


@pytest.mark.parametrize("speedup", [0.5, 1.0, 2.0, 10.0])
def test_correct_kernel_reward_follows_the_formula(speedup):
    assert kernel_reward(True, speedup) == pytest.approx(sigmoid(1 + speedup - 1.8))


def test_default_delta_is_the_papers():
    assert DEFAULT_DELTA == 1.8
    assert kernel_reward(True, 1.0) == pytest.approx(sigmoid(0.2))


def test_negative_speedup_is_clamped_and_cpu_has_no_speedup_term():
    assert kernel_reward(True, -3.0) == pytest.approx(sigmoid(1 - 1.8))
    assert kernel_reward(True, None) == pytest.approx(sigmoid(1 - 1.8))


def test_delta_is_configurable_and_monotone_in_speedup():
    assert kernel_reward(True, 1.0, delta=0.0) == pytest.approx(sigmoid(2.0))
    values = [kernel_reward(True, s) for s in (0.1, 0.5, 1, 2, 4)]
    assert values == sorted(values) and len(set(values)) == len(values)


def test_non_finite_inputs():
    assert kernel_reward(True, float("inf")) == 0.0
    assert kernel_reward(True, float("nan")) == 0.0
    with pytest.raises(ValueError):
        kernel_reward(True, 1.0, delta=float("nan"))


def test_verdict_reward_zero_for_every_failure_and_for_hacks():
    for status in Status:
        v = Verdict(status, "p", "cpu", speedup=2.0)
        expected = sigmoid(1 + 2.0 - 1.8) if status is Status.CORRECT else 0.0
        assert reward_for_verdict(v) == pytest.approx(expected)
    flagged = Verdict(Status.CORRECT, "p", "cpu", speedup=2.0, hack=HackFinding("noop_kernel", "x"))
    assert reward_for_verdict(flagged) == 0.0


def test_a_delta_that_is_not_a_finite_number_is_refused_before_anything_is_evaluated():
    """benchmark.py delta=abc evaluated every answer, then died at the first reward with a TypeError traceback;
    eval_kernel.py --delta nan did the same with a ValueError. The reward refuses it when it is built."""
    from rewards.kernel_reward import check_delta, reward_function

    assert check_delta(2) == 2.0 and check_delta(-1.5) == -1.5
    for bad in ("abc", "1.8", float("nan"), float("inf"), None, True):
        with pytest.raises(ValueError, match="delta must be a finite number"):
            check_delta(bad)
    with pytest.raises(ValueError, match="'abc'"):
        reward_function("abc")  # what the service builds before it starts a backend
