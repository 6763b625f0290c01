"""The typed messages between a WorkerSet and a worker: what each side accepts, and what a malformed one becomes."""

from __future__ import annotations

import dataclasses

import pytest

from envs import EvalSettings, Status, resolve_problem
from envs.source import CanonicalSolution
from envs.verdict import HackFinding, TimingStats
from envs.worker.messages import MalformedMessage, WorkerRequest, WorkerResult
from envs.worker.worker_set import WorkerSet

STATS = dataclasses.asdict(TimingStats.from_samples([1.0, 2.0, 3.0]))


def request(**changes) -> WorkerRequest:
    base = WorkerRequest(
        nonce="n" * 32,
        device="cpu",
        problem={"id": "p", "source": "x", "tolerance": None, "sizes": {}},
        solution="code",
        timing=None,
        max_torch_share=0.25,
        baselines=[],
        cpu_rechecks=3,
        floor_fraction=0.9,
        correctness={"families": ["outliers"], "probe": True, "truth": "off"},
        init_seed=1,
        timing_seed=2,
        seeds=[3, 4],
    )
    return dataclasses.replace(base, **changes)


def test_an_evaluation_request_is_the_json_object_the_harness_reads():
    message = request().to_message()
    assert message["type"] == "evaluate" and "mode" not in message and "profile_calls" not in message
    assert WorkerRequest.from_message(message) == request()
    profile = request(mode="profile", profile_calls=5).to_message()
    assert profile["mode"] == "profile" and WorkerRequest.from_message(profile).profile_calls == 5


@pytest.mark.parametrize(
    "change",
    [
        {"type": "shutdown"},
        {"nonce": None},
        {"problem": "p"},
        {"problem": {"id": "p"}},
        {"seeds": []},
        {"seeds": [1, "2"]},
        {"init_seed": True},
        {"timing": {"runs": 3}},
        {"timing": {"runs": 100, "warmup_ms": 25.0, "anchor_runs": 50, "placements": 48, "precision": "tight"}},
        {"mode": "exec"},
        {"baselines": [1]},
        {"correctness": {}},
        {"solution": 7},
    ],
)
def test_a_malformed_request_names_what_is_wrong(change):
    with pytest.raises(MalformedMessage, match="worker request"):
        WorkerRequest.from_message({**request().to_message(), **change})


def test_the_worker_sets_requests_pass_their_own_check():
    """What WorkerSet builds for each mode is what the harness accepts (no worker is started)."""
    worker_set = object.__new__(WorkerSet)  # _request needs only settings and device
    worker_set.settings, worker_set.device = EvalSettings(device="cpu"), "cpu"
    built = worker_set._request(resolve_problem("L0_02_relu"), CanonicalSolution("code", "sha"), False)
    assert WorkerRequest.from_message(built.to_message()) == built
    worker_set.settings, worker_set.device = EvalSettings(device="cuda", timing_precision=0.01), "cuda"
    timed = worker_set._request(resolve_problem("L0_02_relu"), CanonicalSolution("code", "sha"), False)
    assert timed.timing["precision"] == 0.01 and timed.timing["min_placements"] == 12
    assert WorkerRequest.from_message(timed.to_message()) == timed


def test_sequential_timing_draws_its_probe_run_among_the_runs_it_always_makes():
    from envs.worker.timing_phase import guaranteed_runs

    full = {"runs": 100, "anchor_runs": 50, "placements": 48, "precision": 0.0, "min_placements": 12}
    assert guaranteed_runs(full) == 100
    assert guaranteed_runs({**full, "precision": 0.01}) == 4 * 3 + 8 * 2  # 100 runs over 48 blocks: 4 of 3, then 2s
    assert guaranteed_runs({**full, "precision": 0.01, "min_placements": 100}) == 100


@pytest.mark.parametrize(
    "bad",
    [
        {"timing_precision": -0.1},
        {"timing_precision": 1.0},
        {"min_placements": 0},
        {"launch_allowance_ms": -0.1},
        {"launch_allowance_ms": 11.0},
    ],
)
def test_sequential_timing_settings_are_checked(bad):
    with pytest.raises(ValueError):
        EvalSettings(**bad)


def test_a_precision_changes_the_verdict_cache_key_and_none_keeps_the_one_of_full_timing():
    assert "precision" not in EvalSettings(timing_precision=0).cache_fields("cuda")
    assert EvalSettings(timing_precision=0.02).cache_fields("cuda")["precision"] == 0.02


def test_a_launch_allowance_changes_both_cache_keys_and_none_keeps_the_ones_before_it():
    name = "launch_allowance_ms"
    assert name not in EvalSettings(launch_allowance_ms=0).cache_fields("cuda")
    assert EvalSettings(launch_allowance_ms=1.0).cache_fields("cuda")[name] == 1.0
    worker_set = object.__new__(WorkerSet)
    worker_set.settings, worker_set.device = EvalSettings(device="cuda", launch_allowance_ms=1.0), "cuda"
    timed = worker_set._request(resolve_problem("L0_02_relu"), CanonicalSolution("code", "sha"), False)
    assert WorkerRequest.from_message(timed.to_message()).timing[name] == 1.0
    from envs.cpu_stage import CpuStage

    keys = [
        CpuStage(EvalSettings(device="cuda", launch_allowance_ms=ms), "H200")._baseline_key({"p": 1})
        for ms in (0, 0, 1)
    ]
    assert keys[0] == keys[1] != keys[2]  # baselines timed the other way are kept apart
    with pytest.raises(MalformedMessage, match=name):
        WorkerRequest.from_message({**timed.to_message(), "timing": {**timed.timing, name: "long"}})


def test_a_result_keeps_what_the_verdict_needs():
    result = WorkerResult.from_message(
        {
            "type": "result",
            "status": "correct",
            "healthy": True,
            "notes": ["x" * 900] * 12,
            "kernel": STATS,
            "kernel_samples": [1.0, -1, float("inf"), "2", 2.0],
            "kernel_blocks": [0, 1, 2, 3, 4],
            "torch_share": 0.1,
            "floor_ms": 0.0,
            "suspicious": "fast",
            "baselines": {"eager": STATS, "inductor": None},
        }
    )
    assert result.status is Status.CORRECT and result.healthy and result.kernel == TimingStats(**STATS)
    assert len(result.notes) == 10 and all(len(n) == 500 for n in result.notes)
    assert result.kernel_samples == [1.0, 2.0] and result.kernel_blocks == [0, 4]
    assert result.torch_share == 0.1 and result.floor_ms is None and result.suspicious == "fast"


def test_a_results_reserved_peak_is_the_largest_phase_not_the_tensors_share():
    memory = {"load": 9.0, "correctness": 27.1, "correctness.allocated": 28.0, "timing": 20.0}
    message = {"type": "result", "status": "incorrect", "healthy": True, "memory_gib": memory}
    assert WorkerResult.from_message(message).reserved_peak_gib == 27.1
    assert WorkerResult.from_message({**message, "memory_gib": {}}).reserved_peak_gib is None


def test_an_unknown_status_or_a_malformed_hack_report_is_a_crash():
    assert WorkerResult.from_message({"status": "great"}).status is Status.CRASH
    assert WorkerResult.from_message({"status": "hack", "hack": {"category": "x"}}).status is Status.CRASH
    hack = WorkerResult.from_message({"status": "hack", "hack": {"category": "timing", "reason": "r" * 3000}})
    assert hack.hack == HackFinding("timing", "r" * 2000)


def test_reports_that_are_malformed_are_dropped_not_fatal():
    result = WorkerResult.from_message(
        {
            "status": "correct",
            "accuracy": {"bogus": 1},
            "own_kernel_share": "1",
            "kernel_samples": "many",
            "anchor_seconds": None,
            "steps": {"timing.timed_runs": 1.5, "timing.rechecks": "slow", "timing.floor": float("nan"), "x": -1},
        }
    )
    assert result.accuracy is None and result.own_kernel_share is None and result.kernel_samples == []
    assert result.steps == {"timing.timed_runs": 1.5}


@pytest.mark.parametrize(
    "message",
    [
        {"status": "correct", "kernel": {"median_ms": 1.0}},
        {"status": "correct", "kernel": [1, 2]},
        {"status": "correct", "baselines": ["eager"]},
        {"status": "correct", "baselines": {"eager": {"x": 1}}},
        {"status": "correct", "notes": "not a list"},
    ],
)
def test_a_result_a_verdict_cannot_stand_on_is_malformed(message):
    with pytest.raises(MalformedMessage, match="worker result"):
        WorkerResult.from_message(message)


def test_a_malformed_result_becomes_an_internal_error_verdict_and_the_worker_is_recycled(monkeypatch):
    """No exception leaves WorkerSet.execute for a malformed result: the candidate gets internal_error."""
    worker_set = object.__new__(WorkerSet)
    worker_set.settings, worker_set.device, worker_set._device_kind = EvalSettings(device="cpu"), "cpu", "cpu|t|t"

    def run(request, fresh_worker=False, recycle=False):
        return WorkerResult.from_message({"status": "correct", "kernel": "fast"}), {}, {}

    monkeypatch.setattr(worker_set, "_run", run)
    verdict, measured = worker_set.execute(resolve_problem("L0_02_relu"), CanonicalSolution("code", "sha"), None)
    assert verdict.status is Status.INTERNAL_ERROR and "kernel" in verdict.error and measured is None


def _stats(ms: float, runs: int = 100) -> dict:
    return dataclasses.asdict(TimingStats.from_samples([ms] * runs))


def test_measured_baselines_carry_the_anchor_reference_and_drift_is_judged_against_it(monkeypatch):
    """A launch-bound problem (issue 32): eager 0.010 ms back to back, 0.020 ms as an anchor, nothing drifting.
    The request that measures the baselines asks for the anchor reference; the verdict judges drift against it,
    and baselines cached before it existed (no such key) are judged against eager's median as before."""
    from envs.speedup import ANCHOR_REFERENCE

    worker_set = object.__new__(WorkerSet)
    worker_set.settings, worker_set.device, worker_set._device_kind = (
        EvalSettings(device="cuda", seed=0),
        "cuda",
        "NVIDIA H200|t|t",
    )
    # TorchInductor timed beside the reference, in its blocks, reads as the reference does (0.020 ms)
    measured_now = {"eager": _stats(0.010), "inductor": _stats(0.020, 50), ANCHOR_REFERENCE: _stats(0.020, 50)}
    asked, references = [], []

    def run(request, fresh_worker=False, recycle=False):
        asked.append(request.baselines)
        references.append(request.timing["anchor_reference_ms"] if request.timing["drift_test"] else "off")
        result = {
            "status": "correct",
            "kernel": _stats(0.008),
            "kernel_samples": [0.008] * 100,
            "anchor": _stats(0.020, 50),
            "anchor_samples": [0.020] * 50,
            "baselines": measured_now if request.baselines else None,
        }
        return WorkerResult.from_message(result), {}, {}

    monkeypatch.setattr(worker_set, "_run", run)
    problem, solution = resolve_problem("L0_02_relu"), CanonicalSolution("code", "sha")
    verdict, measured = worker_set.execute(problem, solution, None)
    assert asked == [["eager", "inductor", ANCHOR_REFERENCE]] and measured == measured_now
    assert verdict.timings.anchor_reference == TimingStats(**measured_now[ANCHOR_REFERENCE])
    # no drift from the reference: it stands in for the anchor (the drift test), the same speedup
    assert not verdict.speedup_interval.anchored and verdict.speedup_interval.drift == pytest.approx(1.0)
    assert verdict.speedup == pytest.approx(2.5) and references[-1] is None  # the worker timed the reference itself
    # the same baselines from the cache (JSON): the same verdict's speedup, nothing measured; the worker is told
    # the reference's median, which its stopping rule judges the anchor's drift by
    verdict, measured = worker_set.execute(problem, solution, dict(measured_now))
    assert asked[-1] == [] and measured is None and verdict.speedup == pytest.approx(2.5)
    assert references[-1] == pytest.approx(0.020)
    # an entry cached before the reference existed: drift 2x eager's median, the cached speedup with a note
    old = {"eager": _stats(0.010), "inductor": _stats(0.010)}  # both back to back
    verdict, _ = worker_set.execute(problem, solution, old)
    assert verdict.timings.anchor_reference is None and not verdict.speedup_interval.anchored
    assert verdict.speedup_interval.drift == pytest.approx(2.0) and verdict.speedup == pytest.approx(1.25)
    assert any("its cached time" in n for n in verdict.notes)
    # re-anchoring off: nothing would be judged against a reference, none is asked for
    worker_set.settings = EvalSettings(device="cuda", seed=0, reanchor=False)
    assert worker_set._request(problem, solution, True).baselines == ["eager", "inductor"]


def test_every_step_a_timed_evaluation_reports_reaches_the_verdict():
    """The steps are a bounded report: with the baselines measured in the same request, the parts of both timings'
    placement blocks must not push the candidate's own timing steps (the exclusive seconds) out of it."""
    from envs.timing import BLOCK_PARTS
    from envs.verdict import EXCLUSIVE_STEPS

    names = [
        "baseline.eager",
        "baseline.inductor",
        "baseline.inductor_compile",
        "baseline.anchor_reference",
        *(f"baseline.anchor_reference.{part}" for part in BLOCK_PARTS),
        "baseline.release_settle",
        *(f"correctness.{step}" for step in ("compile", "first_trial", "probe", "trials")),
        *(f"timing.{step}" for step in ("timed_runs", "rechecks", "tail_check", "floor", "kernel_share")),
        "timing.release_settle",
        *(f"timing.timed_runs.{part}" for part in BLOCK_PARTS),
    ]
    message = {"status": "correct", "notes": [], "steps": {name: 0.5 for name in names}}
    steps = WorkerResult.from_message(message).steps
    assert list(steps) == names
    assert set(EXCLUSIVE_STEPS) <= set(steps)
