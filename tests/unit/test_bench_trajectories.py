"""rl.bench.trajectories on hand-made Trajectory records: a trajectory as its sample's attempt (tokens and cost
summed over turns), and its summary's final-vs-best answer and per-turn verdicts."""

import pytest

from envs.verdict import Status, Verdict
from rewards.kernel_reward import reward_for_verdict
from rl.bench.trajectories import _record, trajectory_report, trajectory_summary
from rl.rollout.trajectory_record import ToolCallRecord, Trajectory, Turn


def verdict(status, speedup=None):
    return Verdict(status, "p", "cuda", speedup=speedup)


def trajectory(turns, final, index=0):
    return Trajectory(
        f"p/a0#{index}",
        "p/a0",
        "p",
        index,
        0,
        turns,
        [],
        "final code",
        final,
        reward_for_verdict(final),
        [reward_for_verdict(final)] * len(turns),
        "final",
        "submit",
    )


def check(code, v):
    return ToolCallRecord("kernel_evaluator", {"code": code}, "feedback", True, 0.5, verdict=v)


FAST, SLOW = verdict(Status.CORRECT, speedup=2.0), verdict(Status.CORRECT, speedup=1.1)
WRONG = verdict(Status.INCORRECT)


def test_a_trajectory_is_its_samples_attempt_with_tokens_and_cost_over_its_turns():
    turns = [
        Turn(
            0,
            [1] * 10,
            [2] * 3,
            None,
            "",
            "stop",
            1.5,
            [check("a", WRONG)],
            usage={"prompt_tokens": 12, "completion_tokens": 3, "cost_usd": 0.01},
        ),
        Turn(
            1,
            [1] * 20,
            [2] * 4,
            None,
            "",
            "stop",
            2.0,
            usage={"prompt_tokens": 25, "completion_tokens": 4, "cost_usd": 0.02},
        ),
    ]
    a = _record(trajectory(turns, SLOW, index=1))
    assert (a.sample, a.attempt, a.verdict) == (1, 0, SLOW) and a.finish_reason == "submit"
    assert (a.prompt_tokens, a.completion_tokens, a.generate_seconds) == (37, 7, 3.5)
    assert a.cost_usd == pytest.approx(0.03) and a.text == "final code"
    local = _record(trajectory([Turn(0, [1] * 10, [2] * 3, None, "", "stop", 1.0)], WRONG))
    assert (local.prompt_tokens, local.completion_tokens, local.cost_usd) == (10, 3, None)  # ids, no price


def test_the_summary_compares_the_final_answer_with_the_best_judged_one():
    # turn 0 checks a fast correct draft, turn 1 a wrong one, then submits a slower correct answer
    turns = [
        Turn(0, [1], [2], None, "", "stop", 0.0, [check("fast", FAST)]),
        Turn(1, [1], [2], None, "", "stop", 0.0, [check("bad", WRONG)], answer="final code", verdict=SLOW),
    ]
    s = trajectory_summary(trajectory(turns, SLOW))
    assert s["best"] == {
        "source": "kernel_evaluator",
        "turn": 0,
        "status": "correct",
        "correct": True,
        "speedup": 2.0,
        "reward": reward_for_verdict(FAST),
        "hack": None,
    }
    assert not s["final_is_best"] and s["final"]["speedup"] == 1.1 and s["correct_within_trajectory"]
    assert s["per_turn"] == [
        {"turn": 0, "status": "correct", "correct": True},
        {"turn": 1, "status": "correct", "correct": True},
    ]  # turn 1's own answer was scored
    assert s["reward_gain_first_to_final"] == pytest.approx(reward_for_verdict(SLOW) - reward_for_verdict(FAST))
    assert s["tools"] == {"kernel_evaluator": 2}
    # a tie with the final answer goes to the final answer
    tie = trajectory_summary(trajectory([Turn(0, [1], [2], None, "", "stop", 0.0, [check("same", SLOW)])], SLOW))
    assert tie["final_is_best"] and tie["best"]["source"] == "final"


def test_the_report_shares_are_over_problems_by_sample_zero():
    from envs.problems import load_builtin

    p = next(iter(load_builtin([0])))
    right = trajectory([Turn(0, [1], [2], None, "", "stop", 0.0, [check("x", FAST)])], WRONG, index=0)
    wrong = trajectory([Turn(0, [1], [2], None, "", "stop", 0.0)], WRONG, index=1)
    right, wrong = (Trajectory(**{**t.__dict__, "problem_id": p.id}) for t in (right, wrong))
    report = trajectory_report([wrong, right], [p])
    assert [r["sample"] for r in report["per_problem"][p.id]] == [0, 1]
    assert report["correct_within_trajectory"] == 1.0 and report["final_correct"] == 0.0
    assert report["best_correct"] == 1.0 and report["metrics"]["turns_mean"] == 1.0
