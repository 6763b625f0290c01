"""scripts/bench_train.py's report of a finished run (no run started): the same-problem reward comparison."""

import json

from scripts import bench_train


def _samples(run, rewards_by_step):
    """rewards_by_step: {step: {problem: [rewards]}} written as samples.jsonl rows, plus a validation row."""
    rows = [
        {"split": "train", "step": step, "problem_id": problem, "reward": reward, "status": "correct"}
        for step, problems in rewards_by_step.items()
        for problem, rewards in problems.items()
        for reward in rewards
    ]
    rows.append({"split": "val", "step": 0, "problem_id": "held_out", "reward": 1.0, "status": "correct"})
    run.mkdir()
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_the_same_problems_at_both_ends_not_the_sampler_s_mix(tmp_path):
    """A sampler that draws the easy problem more often late in the run raises the plain mean with no problem
    improving; the same-problem comparison stays flat, and a problem drawn at one end only is left out."""
    run = _samples(
        tmp_path / "run",
        {
            1: {"easy": [0.5, 0.5], "hard": [0.1, 0.1], "only_early": [0.0, 0.0]},
            2: {"easy": [0.5, 0.5], "hard": [0.1, 0.1]},
            3: {"easy": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "hard": [0.1, 0.1]},
            4: {"easy": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "hard": [0.1, 0.1], "only_late": [0.9, 0.9]},
        },
    )
    out = bench_train.same_problem_rewards(bench_train.read_samples(run), 2)
    assert out["steps"] == 2 and out["problems"] == 2
    assert abs(out["first"] - 0.3) < 1e-12 and abs(out["last"] - 0.3) < 1e-12 and abs(out["ratio"] - 1) < 1e-12


def test_windows_shrink_to_half_the_run_and_a_zero_start_has_no_ratio(tmp_path):
    run = _samples(tmp_path / "run", {1: {"a": [0.0]}, 2: {"a": [0.0]}, 3: {"a": [0.5]}})
    assert bench_train.same_problem_rewards(bench_train.read_samples(run), 10) == {
        "steps": 1,
        "problems": 1,
        "first": 0.0,
        "last": 0.5,
        "ratio": None,
    }
    assert bench_train.same_problem_rewards(bench_train.read_samples(tmp_path / "no_such_run"), 10) is None


def test_the_report_reads_the_evaluations_costs_per_step(tmp_path):
    """The exclusive seconds per step and each phase's largest worker, from a GPU run's metric rows."""
    run = _samples(tmp_path / "run", {1: {"a": [0.5]}, 2: {"a": [0.5]}})
    rows = [
        {"step": 1, "train/reward_mean": 0.5, "train/eval_s/exclusive": 4.0, "train/eval_gib/timing": 30.0},
        {
            "step": 2,
            "train/reward_mean": 0.5,
            "train/eval_s/exclusive": 8.0,
            "train/eval_gib/timing": 36.5,
            "train/eval_gib/load": 5.0,
        },
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = bench_train.report(run, None, 1)
    assert out["eval_exclusive_s_per_step"]["median"] == 6.0
    assert out["eval_gib_max"] == {"load": 5.0, "timing": 36.5}
