"""Whose CUDA out-of-memory error it is (envs/worker/oom.py), and how the worker's report crosses the pipe."""

import pytest
import torch

from envs.settings import EvalSettings
from envs.verdict import Status
from envs.worker.messages import WorkerRequest, WorkerResult
from envs.worker.oom import FREE_SLACK_BYTES, CandidateMemory, attribute, find_oom, oom_report, requested_bytes

GiB = 1 << 30
MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which "
    "1.06 GiB is free. Process 123 has 40.00 GiB memory in use."
)


@pytest.mark.parametrize(
    "text, expected",
    [
        (MESSAGE, 2 * GiB),
        ("CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 79.15 GiB total capacity)", 512 << 20),
        ("Tried to allocate 20 B", 20),
        ("CUDA out of memory.", None),
        ("", None),
        ("Tried to allocate " + "9" * 400 + " GiB", None),  # a candidate's own text: no float holds it
    ],
)
def test_the_request_is_read_from_pytorchs_message(text, expected):
    assert requested_bytes(text) == expected


def test_within_budget_on_a_full_device_is_the_environments():
    verdict = attribute(held=3 * GiB, request=2 * GiB, budget=8 * GiB, device_free=GiB)
    assert verdict.owner == "environment" and verdict.environment
    assert "other processes" in verdict.reason and "8.00 GiB" in verdict.reason


def test_over_budget_is_the_candidates_whatever_the_device():
    over = attribute(held=7 * GiB, request=2 * GiB, budget=8 * GiB, device_free=0)
    assert over.owner == "candidate" and "over its budget" in over.reason
    # exactly at the budget is still within it
    assert attribute(held=6 * GiB, request=2 * GiB, budget=8 * GiB, device_free=0).environment


def test_the_request_counts_and_is_parsed_from_the_text_when_not_given():
    # 7 GiB held: within an 8 GiB budget alone, over it with the 2 GiB the message says it asked for
    assert attribute(7 * GiB, None, 8 * GiB, MESSAGE, device_free=0).owner == "candidate"
    assert attribute(5 * GiB, None, 8 * GiB, MESSAGE, device_free=0).owner == "environment"
    # no size in the text: the request counts as 0
    assert attribute(7 * GiB, None, 8 * GiB, "CUDA out of memory.", device_free=0).owner == "environment"


def test_a_device_with_room_for_the_request_makes_it_the_candidates():
    # a candidate raising OutOfMemoryError itself while the GPU has room is not retried
    roomy = attribute(GiB, 2 * GiB, 8 * GiB, device_free=2 * GiB + FREE_SLACK_BYTES)
    assert roomy.owner == "candidate" and "free" in roomy.reason
    assert attribute(GiB, 2 * GiB, 8 * GiB, device_free=2 * GiB + FREE_SLACK_BYTES - 1).environment
    # unknown free memory (CPU): not checked
    assert attribute(GiB, 2 * GiB, 8 * GiB, device_free=None).environment


def test_before_any_candidate_code_ran_it_is_the_environments():
    # the reference or the truth ran out on a full GPU: no candidate code existed to blame, whatever the process
    # held (a warm worker's cached memory, the harness's own tensors)
    early = attribute(0, 6 * GiB, 4 * GiB, device_free=GiB, candidate_ran=False)
    assert early.environment and "before any of the candidate's code ran" in early.reason


def test_the_harnesss_own_request_after_the_candidate_ran_does_not_count_against_it():
    # the checks' 4 GiB buffer failed on a full GPU; the candidate's calls held 3 GiB at most: within 8 GiB
    harness = attribute(3 * GiB, 4 * GiB, 8 * GiB, device_free=GiB, in_candidate=False)
    assert harness.environment and "held at most 3.00 GiB" in harness.reason
    # had the candidate's call asked for it, 3 + 6 GiB would be over the budget
    assert attribute(3 * GiB, 6 * GiB, 8 * GiB, device_free=GiB).owner == "candidate"
    assert attribute(3 * GiB, 6 * GiB, 8 * GiB, device_free=GiB, in_candidate=False).environment
    # a candidate that held more than its budget in its own calls owns any OOM after them
    assert attribute(9 * GiB, GiB, 8 * GiB, device_free=0, in_candidate=False).owner == "candidate"
    # room on the device only convicts a candidate call that raised the OOM itself
    roomy = 4 * GiB + FREE_SLACK_BYTES
    assert attribute(GiB, 4 * GiB, 8 * GiB, device_free=roomy, in_candidate=False).environment


def test_candidate_memory_marks_what_ran_and_where_the_error_left():
    memory = CandidateMemory(torch.device("cpu"))
    assert not memory.ran and memory.peak == 0
    with memory.reference():
        pass
    assert not memory.ran and memory.reference_peak == 0  # nothing measured off CUDA
    start = memory.begin(measure=False)
    assert memory.ran and start is None
    memory.end(start, raised=True)
    assert memory.raised_in_candidate
    with pytest.raises(ImportError):
        with memory.candidate():
            raise ImportError("the solution's import")
    assert memory.raised_in_candidate
    with memory.candidate():
        pass
    assert not memory.raised_in_candidate  # the last candidate code returned: a later OOM is the harness's
    error = torch.OutOfMemoryError(MESSAGE)
    report = oom_report(error, {"bytes": GiB}, torch.device("cpu"), memory)
    assert report["owner"] == "environment" and "the evaluation asked for 2.00 GiB" in report["reason"]
    assert oom_report(error, {"bytes": GiB}, torch.device("cpu"), CandidateMemory("cpu"))["owner"] == "environment"
    memory.reference_peak = 3 * GiB  # a reference that needs 3 GiB lifts a 1 GiB budget to 6 GiB
    assert oom_report(error, {"bytes": GiB}, torch.device("cpu"), memory)["budget"] == 6 * GiB


def test_without_a_budget_every_oom_is_the_candidates():
    assert attribute(0, 2 * GiB, None, device_free=0).owner == "candidate"


def test_the_oom_is_found_behind_the_verdict_the_worker_raised_from_none():
    class Outcome(Exception):
        pass

    try:
        try:
            raise torch.OutOfMemoryError(MESSAGE)
        except Exception:
            raise Outcome("runtime_error") from None
    except Outcome as o:
        assert isinstance(find_oom(o), torch.OutOfMemoryError)
    assert find_oom(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")) is None  # text alone is not one
    assert find_oom(MemoryError()) is None


CUDA_RUNTIME_OOM = (
    "CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information."
)


def test_cudas_own_allocation_failure_is_an_oom_with_no_request_and_other_cuda_errors_are_not():
    """What an H100 shared with the engine and the learner raised 31 times (docs/gpu-notes.md, session 26): an
    AcceleratorError, not the allocator's OutOfMemoryError, judged the candidates' runtime_error until then."""
    error = torch.AcceleratorError(CUDA_RUNTIME_OOM)
    assert find_oom(error) is error
    assert find_oom(torch.AcceleratorError("CUDA error: an illegal memory access was encountered")) is None
    report = oom_report(error, {"bytes": 4 * GiB}, torch.device("cpu"))
    assert report["owner"] == "environment" and report["request"] is None and report["held"] == 0
    # raised by a candidate call while the device had room: the candidate's, as for OutOfMemoryError
    assert attribute(0, None, 4 * GiB, str(error), device_free=8 * GiB).owner == "candidate"


def test_the_workers_report_on_cpu_uses_the_budget_it_was_given():
    error = torch.OutOfMemoryError(MESSAGE)
    within = oom_report(error, {"bytes": 4 * GiB}, torch.device("cpu"))
    assert within["owner"] == "environment" and within["held"] == 0 and within["request"] == 2 * GiB
    assert oom_report(error, {"bytes": GiB}, torch.device("cpu"))["owner"] == "candidate"
    # a share of the device means nothing off CUDA; no spec at all: the candidate's as before
    assert oom_report(error, {"share": 0.25}, torch.device("cpu"))["owner"] == "candidate"
    assert oom_report(error, None, torch.device("cpu"))["budget"] is None
    assert oom_report(ValueError("x"), {"bytes": 4 * GiB}, torch.device("cpu")) is None


def test_the_budget_setting_reaches_the_request():
    assert EvalSettings(worker_memory_gib=2.5).memory_budget("cpu") == {"bytes": int(2.5 * GiB)}
    assert EvalSettings().memory_budget("cpu") is None
    assert EvalSettings(workers=4, gpu_share=0.25).memory_budget("cuda") == {"share": 0.0625}
    with pytest.raises(ValueError):
        EvalSettings(gpu_share=0)
    with pytest.raises(ValueError):
        EvalSettings(worker_memory_gib=0)
    with pytest.raises(ValueError):
        EvalSettings(oom_retries=-1)


def _request(**extra) -> WorkerRequest:
    return WorkerRequest(
        nonce="n",
        device="cpu",
        problem={"id": "p", "source": "", "tolerance": None, "sizes": {}},
        solution=None,
        timing=None,
        max_torch_share=0.25,
        baselines=[],
        cpu_rechecks=0,
        floor_fraction=0.9,
        correctness={"families": []},
        init_seed=1,
        timing_seed=2,
        seeds=[3],
        **extra,
    )


def test_the_budget_crosses_the_pipe_and_is_checked():
    message = _request(memory_budget={"share": 0.25}).to_message()
    assert WorkerRequest.from_message(message).memory_budget == {"share": 0.25}
    assert "memory_budget" not in _request().to_message()
    from envs.worker.messages import MalformedMessage

    with pytest.raises(MalformedMessage):
        WorkerRequest.from_message({**message, "memory_budget": {"bytes": "lots"}})


def test_only_a_failed_run_with_the_environments_oom_is_retried():
    report = {"owner": "environment", "reason": "full", "held": 1, "request": 2, "budget": 3, "device_free": 0}
    failed = WorkerResult.from_message({"status": "runtime_error", "oom": report})
    assert failed.environment_oom and failed.oom["budget"] == 3
    assert not WorkerResult.from_message(
        {"status": "runtime_error", "oom": {**report, "owner": "candidate"}}
    ).environment_oom
    assert not WorkerResult.from_message({"status": "correct", "oom": report}).environment_oom
    assert WorkerResult.from_message({"status": "runtime_error", "oom": {"owner": "nobody"}}).oom is None
    assert WorkerResult.from_message({"status": "runtime_error", "oom": "yes"}).oom is None
    assert WorkerResult.from_message({"status": "runtime_error"}).status is Status.RUNTIME_ERROR


class _Allocator:
    """CUDA's caching-allocator statistics as torch.cuda reports them (no GPU here; the real ones are read in
    tests/gpu/test_cuda_evaluation.py): reserved and allocated memory, and their peaks since the last reset."""

    def __init__(self):
        self.reserved = self.peak = self.allocated = self.allocated_peak = 0

    def reserve(self, n: int, allocated: int = 0) -> None:
        self.reserved, self.allocated = n, allocated
        self.peak = max(self.peak, n)
        self.allocated_peak = max(self.allocated_peak, allocated)

    def reset(self, device=None) -> None:
        self.peak, self.allocated_peak = self.reserved, self.allocated


def test_a_phases_peaks_survive_the_resets_of_candidate_calls(monkeypatch):
    allocator = _Allocator()
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: allocator.peak)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocator.allocated_peak)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", allocator.reset)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocator.allocated)
    memory = CandidateMemory(torch.device("cuda"))
    assert memory.phase_peaks() == (0, 0)
    allocator.reserve(30 * GiB, 20 * GiB)  # the harness's fp64 truth, say
    allocator.reserve(12 * GiB, 2 * GiB)  # ... given back with empty_cache
    memory.end(memory.begin(), raised=False)  # a candidate call resets the statistics for its own peak
    allocator.reserve(14 * GiB, 9 * GiB)
    allocator.reserve(14 * GiB, 3 * GiB)
    # the phase's peaks, from before the candidate's reset
    assert memory.phase_peaks() == (30 * GiB, 20 * GiB)
    assert memory.phase_peaks() == (14 * GiB, 3 * GiB)  # the next phase starts from what is held now
    assert CandidateMemory(torch.device("cpu")).phase_peaks() is None  # nothing to read off CUDA


def test_unreadable_allocator_statistics_are_no_measurement(monkeypatch):
    def broken(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "max_memory_reserved", broken)
    assert CandidateMemory(torch.device("cuda")).phase_peaks() is None
