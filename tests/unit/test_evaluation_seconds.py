"""Where a step's evaluations spent their time (rl.metrics.evaluation_seconds), and the exclusive-lock steps it
sums (envs.verdict.EXCLUSIVE_STEPS)."""

from pathlib import Path

import pytest

from envs.verdict import EXCLUSIVE_STEPS, Status, Verdict
from rl.metrics import evaluation_seconds, rollout_metrics
from rl.types import Group, Sample, ScoredSample

ROOT = Path(__file__).resolve().parents[2]


def _scored(i: int, verdict: Verdict) -> ScoredSample:
    return ScoredSample(Sample("p/0", verdict.problem_id, i, [1], [2], "t", None, "stop", 0), verdict, 0.0)


def _verdict(problem_id="p", cached=False, **phases) -> Verdict:
    return Verdict(Status.CORRECT, problem_id, "NVIDIA H200", cached=cached, phase_seconds=dict(phases))


def test_phases_are_summed_over_distinct_evaluations_that_ran():
    timed = {"static": 0.01, "correctness": 1.5, "timing": 3.0, "timing.timed_runs": 2.0, "timing.tail_check": 0.25}
    first = _verdict(**timed)
    copy = _verdict(**timed)  # a deduplicated candidate: the same job's verdict, delivered twice
    other = _verdict(static=0.02, correctness=0.5, timing=1.0, **{"timing.timed_runs": 0.5})
    hit = _verdict(cached=True, **timed)  # a cache hit: the phases of an earlier evaluation
    failed = Verdict(Status.COMPILE_ERROR, "q", "NVIDIA H200", phase_seconds={"static": 0.01, "compile": 0.3})
    bare = Verdict(Status.INCORRECT, "q", "NVIDIA H200")  # no phases at all (e.g. made up by a test double)
    out = evaluation_seconds([_scored(i, v) for i, v in enumerate([first, copy, other, hit, failed, bare])], "train")

    assert out["train/evaluations"] == 3
    assert out["train/eval_s/correctness"] == pytest.approx(2.0)
    assert out["train/eval_s/timing"] == pytest.approx(4.0)
    assert out["train/eval_s/static"] == pytest.approx(0.04)
    assert out["train/eval_s/compile"] == pytest.approx(0.3)
    assert out["train/eval_s/exclusive"] == pytest.approx(2.25 + 0.5)
    assert not any(k.startswith("train/eval_s/timing.") for k in out)  # steps are inside their phase


def test_the_same_phases_on_two_problems_are_two_evaluations():
    phases = {"timing": 1.0, "timing.timed_runs": 1.0}
    out = evaluation_seconds([_scored(0, _verdict("a", **phases)), _scored(1, _verdict("b", **phases))], "val")
    assert out["val/evaluations"] == 2 and out["val/eval_s/exclusive"] == pytest.approx(2.0)


def test_rollout_metrics_carry_them_and_a_cpu_run_holds_nothing_exclusively():
    cpu = Verdict(Status.CORRECT, "p", "cpu", phase_seconds={"static": 0.01, "correctness": 0.09, "timing": 0.18})
    m = rollout_metrics([Group("p/0", "p", [_scored(0, cpu)])], "train", max_tokens=16)
    assert m["train/evaluations"] == 1 and m["train/eval_s/timing"] == pytest.approx(0.18)
    assert m["train/eval_s/exclusive"] == 0.0


def test_exclusive_steps_are_names_the_worker_records():
    """A renamed step in the worker would silently drop out of the exclusive seconds."""
    sources = "".join(p.read_text() for p in (ROOT / "envs" / "worker").glob("*.py"))
    for step in EXCLUSIVE_STEPS:
        assert f'"{step}"' in sources, step
