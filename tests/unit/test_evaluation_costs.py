"""What a step's evaluations cost (rl.metrics.evaluation_costs): their phases' seconds, the exclusive-lock steps
(envs.verdict.EXCLUSIVE_STEPS) and the GPU memory reserved by each phase's end, as the worker reports it."""

from pathlib import Path

import pytest

from envs.verdict import EXCLUSIVE_STEPS, Status, Verdict
from envs.worker.messages import WorkerResult
from rl.metrics import evaluation_costs, rollout_metrics
from rl.types import Group, Sample, ScoredSample

ROOT = Path(__file__).resolve().parents[2]


def _scored(i: int, verdict: Verdict) -> ScoredSample:
    return ScoredSample(Sample("p/0", verdict.problem_id, i, [1], [2], "t", None, "stop", 0), verdict, 0.0)


def _verdict(problem_id="p", cached=False, memory=None, **phases) -> Verdict:
    return Verdict(
        Status.CORRECT,
        problem_id,
        "NVIDIA H200",
        cached=cached,
        phase_seconds=dict(phases),
        phase_memory_gib=memory or {},
    )


def test_phases_are_summed_over_distinct_evaluations_that_ran():
    timed = {"static": 0.01, "correctness": 1.5, "timing": 3.0, "timing.timed_runs": 2.0, "timing.tail_check": 0.25}
    first = _verdict(**timed)
    copy = _verdict(**timed)  # a deduplicated candidate: the same job's verdict, delivered twice
    other = _verdict(static=0.02, correctness=0.5, timing=1.0, **{"timing.timed_runs": 0.5})
    hit = _verdict(cached=True, **timed)  # a cache hit: the phases of an earlier evaluation
    failed = Verdict(Status.COMPILE_ERROR, "q", "NVIDIA H200", phase_seconds={"static": 0.01, "compile": 0.3})
    bare = Verdict(Status.INCORRECT, "q", "NVIDIA H200")  # no phases at all (e.g. made up by a test double)
    out = evaluation_costs([_scored(i, v) for i, v in enumerate([first, copy, other, hit, failed, bare])], "train")

    assert out["train/evaluations"] == 3
    assert out["train/eval_s/correctness"] == pytest.approx(2.0)
    assert out["train/eval_s/timing"] == pytest.approx(4.0)
    assert out["train/eval_s/static"] == pytest.approx(0.04)
    assert out["train/eval_s/compile"] == pytest.approx(0.3)
    assert out["train/eval_s/exclusive"] == pytest.approx(2.25 + 0.5)
    assert not any(k.startswith("train/eval_s/timing.") for k in out)  # steps are inside their phase


def test_the_same_phases_on_two_problems_are_two_evaluations():
    phases = {"timing": 1.0, "timing.timed_runs": 1.0}
    out = evaluation_costs([_scored(0, _verdict("a", **phases)), _scored(1, _verdict("b", **phases))], "val")
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


def test_memory_is_the_most_any_evaluation_reserved_by_each_phase():
    small = _verdict("a", memory={"load": 4.0, "correctness": 13.0, "timing": 13.0}, timing=1.0)
    large = _verdict("b", memory={"load": 6.0, "correctness": 30.5, "timing": 36.8}, timing=2.0)
    hit = _verdict("c", cached=True, memory={"load": 99.0}, timing=3.0)  # an earlier evaluation's numbers
    out = evaluation_costs([_scored(0, small), _scored(1, large), _scored(2, hit)], "train")
    assert out["train/eval_gib/load"] == 6.0
    assert out["train/eval_gib/correctness"] == 30.5 and out["train/eval_gib/timing"] == 36.8


def test_the_workers_memory_report_is_read_as_a_report():
    """The worker runs the candidate's code, so what it reports is checked: numbers by name, malformed ones
    left out, never an error."""
    base = {"status": "correct", "healthy": True}
    result = WorkerResult.from_message(
        {**base, "memory_gib": {"load": 4.0, "timing": 36.8, "bad": "x", "neg": -1.0, "inf": float("inf")}}
    )
    assert result.memory_gib == {"load": 4.0, "timing": 36.8}
    assert WorkerResult.from_message({**base, "memory_gib": [1, 2]}).memory_gib == {}
    assert WorkerResult.from_message(base).memory_gib == {}
    flood = {f"phase{i}": float(i) for i in range(100)}
    assert len(WorkerResult.from_message({**base, "memory_gib": flood}).memory_gib) == 64


def test_a_verdict_cached_before_the_memory_field_still_loads():
    d = _verdict(memory={"load": 4.0}, timing=1.0).to_dict()
    assert Verdict.from_dict(d).phase_memory_gib == {"load": 4.0}
    del d["phase_memory_gib"]
    assert Verdict.from_dict(d).phase_memory_gib == {}


def test_bench_eval_reports_each_phases_memory():
    from scripts.bench_eval import phase_memory

    verdicts = [_verdict(memory={"load": 4.0, "timing": 30.0}), _verdict(memory={"load": 6.0, "timing": 10.0})]
    assert phase_memory(verdicts) == {
        "load": {"median_gib": 5.0, "max_gib": 6.0},
        "timing": {"median_gib": 20.0, "max_gib": 30.0},
    }
    assert phase_memory([_verdict(timing=1.0)]) == {}  # a CPU run's verdicts: nothing to report


def test_bench_eval_counts_what_the_workers_were_busy_with():
    """A worker is busy from the moment it takes a request to its result: the driver's checks, the waits before
    (`queue` and its causes) and the backoffs between attempts are not its time; a failed attempt's is."""
    from scripts.bench_eval import summarize, worker_busy_seconds

    ran = _verdict(total=5.0, static=0.1, queue=1.5, **{"queue.admission": 1.5}, correctness=2.0, timing=1.4)
    retried = _verdict(total=9.0, static=0.1, queue=0.9, oom_backoff=2.0, correctness=1.0)
    refused = Verdict(Status.HACK, "p", "NVIDIA H200", phase_seconds={"static": 0.2, "total": 0.2})
    assert worker_busy_seconds(ran) == pytest.approx(3.4)
    assert worker_busy_seconds(retried) == pytest.approx(6.0)  # its failed attempt held a worker too
    assert worker_busy_seconds(refused) == 0.0  # stopped by the driver's static checks
    queued_in_ray = _verdict(total=7.0, static=0.1, pool_queue=2.0, queue=1.5, correctness=2.0, timing=1.4)
    assert worker_busy_seconds(queued_in_ray) == pytest.approx(3.4)  # the Ray pool's queue is a wait too
    summary = summarize([ran, retried, refused], wall=4.7, devices=1, workers=2)
    assert summary["workers_busy"] == pytest.approx(9.4 / 9.4)
    assert summarize([ran], wall=4.7)["workers_busy"] is None  # a pass that does not say how many workers


def test_bench_eval_reports_what_a_placement_block_costs_by_part():
    import dataclasses

    from envs.timing import BLOCK_PARTS
    from envs.verdict import SpeedupInterval
    from scripts.bench_eval import block_parts_ms

    def timed(blocks, **parts):
        interval = SpeedupInterval(0.9, 1.1, 0.95, True, 1.0, 1000, blocks=blocks)
        steps = {f"timing.timed_runs.{part}": seconds for part, seconds in parts.items()}
        return dataclasses.replace(_verdict(**steps), speedup_interval=interval)

    ms = block_parts_ms([timed(12, move=0.12, runs=0.06), timed(48, move=0.24, runs=0.48), _verdict(timing=1.0)])
    assert set(ms) == set(BLOCK_PARTS)  # every part, those a verdict lacks at 0
    assert ms["move"] == pytest.approx(7.5) and ms["runs"] == pytest.approx(7.5) and ms["warmup"] == 0.0
    assert block_parts_ms([_verdict(timing=1.0)]) == {}  # nothing timed in blocks (a CPU run)
