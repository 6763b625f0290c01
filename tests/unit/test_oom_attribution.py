"""Whose CUDA out-of-memory error it is (envs/worker/oom.py), and how the worker's report crosses the pipe."""

import pytest
import torch

from envs.settings import EvalSettings
from envs.verdict import Status
from envs.worker.messages import WorkerRequest, WorkerResult
from envs.worker.oom import FREE_SLACK_BYTES, attribute, find_oom, oom_report, requested_bytes

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
    verdict = attribute(reserved=3 * GiB, request=2 * GiB, budget=8 * GiB, device_free=GiB)
    assert verdict.owner == "environment" and verdict.environment
    assert "other processes" in verdict.reason and "8.00 GiB" in verdict.reason


def test_over_budget_is_the_candidates_whatever_the_device():
    over = attribute(reserved=7 * GiB, request=2 * GiB, budget=8 * GiB, device_free=0)
    assert over.owner == "candidate" and "over its budget" in over.reason
    # exactly at the budget is still within it
    assert attribute(reserved=6 * GiB, request=2 * GiB, budget=8 * GiB, device_free=0).environment


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


def test_the_workers_report_on_cpu_uses_the_budget_it_was_given():
    error = torch.OutOfMemoryError(MESSAGE)
    within = oom_report(error, {"bytes": 4 * GiB}, torch.device("cpu"))
    assert within["owner"] == "environment" and within["reserved"] == 0 and within["request"] == 2 * GiB
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
    report = {"owner": "environment", "reason": "full", "reserved": 1, "request": 2, "budget": 3, "device_free": 0}
    failed = WorkerResult.from_message({"status": "runtime_error", "oom": report})
    assert failed.environment_oom and failed.oom["budget"] == 3
    assert not WorkerResult.from_message(
        {"status": "runtime_error", "oom": {**report, "owner": "candidate"}}
    ).environment_oom
    assert not WorkerResult.from_message({"status": "correct", "oom": report}).environment_oom
    assert WorkerResult.from_message({"status": "runtime_error", "oom": {"owner": "nobody"}}).oom is None
    assert WorkerResult.from_message({"status": "runtime_error", "oom": "yes"}).oom is None
    assert WorkerResult.from_message({"status": "runtime_error"}).status is Status.RUNTIME_ERROR
