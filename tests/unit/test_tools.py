"""The tools of envs/tools: registry and schemas, verdict feedback, kernel_search over the solution store (with
its leakage rules), docs_search over the installed triton, profile's CPU answer and report format."""

from __future__ import annotations

import asyncio
import json

import pytest
import triton

from envs import resolve_problem
from envs.solutions import SolutionStore, default_solutions_path
from envs.tools import TOOLS, ToolContext, resolve_tools, schemas
from envs.tools.feedback import verdict_feedback
from envs.tools.profile import NEEDS_GPU, format_profile
from envs.tools.triton_docs import installed_docs
from envs.verdict import HackFinding, Status, Timings, TimingStats, Verdict
from envs.retrieval import KernelIndex, SolvedKernel, builtin_solutions


def call(name, arguments, context):
    return asyncio.run(TOOLS[name].run(arguments, context))


def stats(ms):
    return TimingStats(ms, ms, 0.0, ms, ms, ms, ms, 100)


# ------------------------------------------------------------------------------------------- registry
def test_every_tool_has_an_openai_function_schema():
    declared = schemas(resolve_tools(["kernel_evaluator", "kernel_search", "docs_search", "profile"]))
    assert [d["function"]["name"] for d in declared] == [
        "kernel_evaluator",
        "kernel_search",
        "docs_search",
        "profile",
        "submit",
    ]
    for d in declared:
        assert d["type"] == "function" and d["function"]["description"]
        params = d["function"]["parameters"]
        assert params["type"] == "object" and params["required"] and params["additionalProperties"] is False
        json.dumps(d)  # plain JSON, as the API needs


def test_unknown_tools_and_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown tool.*web_search"):
        resolve_tools(["kernel_search", "web_search"])
    tool = TOOLS["kernel_evaluator"]
    assert "missing the argument(s) code" in tool.check_arguments({})
    assert "no argument(s) path" in tool.check_arguments({"code": "x", "path": "y"})
    assert "must be a string" in tool.check_arguments({"code": 3})
    assert "JSON object" in tool.check_arguments(["code"])
    assert tool.check_arguments({"code": "x"}) is None


# ------------------------------------------------------------------------------------------- feedback
def test_feedback_for_a_correct_gpu_verdict_gives_both_speedups_and_the_own_kernel_share():
    v = Verdict(
        Status.CORRECT,
        "p",
        "NVIDIA H200",
        timings=Timings(stats(0.5), stats(1.0), stats(0.75)),
        speedup=1.5,
        baseline="inductor",
        own_kernel_share=0.93,
    )
    text = verdict_feedback(v, 0.67)
    assert "status: correct" in text and "kernel time: 0.5 ms" in text
    assert "speedup vs eager PyTorch: 2x" in text and "speedup vs TorchInductor: 1.5x" in text
    assert "own-kernel share of device time: 93%" in text and "reward: 0.670" in text


def test_feedback_for_cpu_incorrect_and_errors():
    cpu = verdict_feedback(Verdict(Status.CORRECT, "p", "cpu"), 0.55)
    assert "not measured" in cpu and "CPU" in cpu
    mismatch = {
        "reason": "values differ",
        "max_abs_diff": 0.5,
        "max_rel_diff": 1.0,
        "worst_index": [3, 1],
        "value": 1.5,
        "expected": 1.0,
    }
    wrong = verdict_feedback(Verdict(Status.INCORRECT, "p", "cpu", error="trial 1 of 5: ...", mismatch=mismatch))
    assert "mismatch: values differ; max abs diff 0.5" in wrong and "worst at index [3, 1]" in wrong
    long_error = "Traceback\n" + "x = 1\n" * 1000 + "ValueError: the real cause"
    failed = verdict_feedback(Verdict(Status.RUNTIME_ERROR, "p", "cpu", error=long_error), 0.0)
    assert failed.endswith("ValueError: the real cause\nreward: 0.000") and "earlier lines omitted" in failed
    assert len(failed) < 1700


def test_hack_feedback_names_the_rule_but_not_the_detectors_reason():
    reason = "forward calls torch.matmul on a 4096x4096 tensor at line 12 (aliased as mm)"
    text = verdict_feedback(
        Verdict(
            Status.HACK, "p", "cpu", error=f"baseline_kernel: {reason}", hack=HackFinding("baseline_kernel", reason)
        )
    )
    assert "rule: baseline_kernel (the main computation is done by PyTorch ops" in text
    assert "matmul" not in text and "line 12" not in text and "aliased" not in text


# ------------------------------------------------------------------------------------------- store + search
def test_solution_store_keeps_verified_solutions_once_and_persists(tmp_path):
    relu = resolve_problem("L0_02_relu")
    store = SolutionStore(tmp_path / "solutions.sqlite")
    assert default_solutions_path(tmp_path / "verdicts.sqlite") == tmp_path / "solutions.sqlite"
    assert store.seed(builtin_solutions([0])) == 7 and store.seed(builtin_solutions([0])) == 0
    wrong = Verdict(Status.INCORRECT, relu.id, "cpu")
    assert not store.add_verified(relu, "code A", wrong, "train", "step 1")
    assert store.add_verified(
        relu, "code A", Verdict(Status.CORRECT, relu.id, "NVIDIA H200", speedup=1.2), "train", "step 1"
    )
    assert not store.add_verified(
        relu, "code A", Verdict(Status.CORRECT, relu.id, "NVIDIA H200", speedup=2.0), "train", "step 2"
    )
    with pytest.raises(ValueError, match="split"):
        store.add(SolvedKernel("x", "src", "sol"), "test")
    store.close()
    again = SolutionStore(tmp_path / "solutions.sqlite")
    found = [r for r in again.records() if r.solution == "code A"]
    assert len(found) == 1 and found[0].speedup == 2.0 and found[0].provenance == "step 1"
    assert again.count() == 8


def test_kernel_search_returns_other_problems_solutions_and_never_held_out_ones(tmp_path):
    store = SolutionStore(tmp_path / "solutions.sqlite")
    store.seed(builtin_solutions())
    softmax = resolve_problem("L2_01_softmax")
    # a solution found while benchmarking a held-out problem: must never be served while training
    held = SolvedKernel(
        "bench/online_softmax", softmax.source.replace("Model", "Model "), "HELD OUT SOLUTION", 1.7, "benchmark run"
    )
    store.add(held, "benchmark")
    index = KernelIndex(store.records(exclude_splits=("validation", "benchmark")))
    relu = resolve_problem("L0_02_relu")
    text = call("kernel_search", {"query": "softmax over rows"}, ToolContext(relu, solutions=index)).text
    assert "problem L2_01_softmax" in text and "verified solution" in text and "HELD OUT" not in text
    # the current problem's own solution is never returned, even for a query naming it
    own = call("kernel_search", {"query": softmax.source}, ToolContext(softmax, solutions=index)).text
    assert "problem L2_01_softmax" not in own and "result 1" in own
    assert not call("kernel_search", {"query": "  "}, ToolContext(relu, solutions=index)).ok
    assert "no verified kernel" in call("kernel_search", {"query": "zzqx"}, ToolContext(relu, solutions=index)).text
    assert not call("kernel_search", {"query": "x"}, ToolContext(relu)).ok  # not configured: said so


# ------------------------------------------------------------------------------------------- docs
def test_docs_search_answers_from_the_installed_triton():
    docs = installed_docs()
    assert docs.triton_version == triton.__version__ and len(docs) > 50
    result = call("docs_search", {"query": "tl.load"}, ToolContext(resolve_problem("L0_02_relu")))
    assert result.text.startswith(f"Triton {triton.__version__} reference:\n\ntl.load(pointer, mask=None, other=None")
    assert "_semantic" not in result.text
    assert [e.name for e in docs.search("atomic add")][0] == "tl.atomic_add"
    assert "tl.dot" in [e.name for e in docs.search("matrix product dot")]
    assert not call("docs_search", {"query": ""}, ToolContext(resolve_problem("L0_02_relu"))).ok


# ------------------------------------------------------------------------------------------- profile
def test_profile_on_cpu_says_it_needs_a_gpu():
    result = call("profile", {"code": "x"}, ToolContext(resolve_problem("L0_02_relu")))
    assert not result.ok and result.text == NEEDS_GPU


def test_profile_report_computes_bandwidth_and_flops_against_peak():
    facts = {
        "device": "NVIDIA H200",
        "calls": 10,
        "device_us_per_forward": 100.0,
        "min_bytes": 240_000_000,
        "flops": 2e12 * 100e-6 * 10,
        "peak_bytes_per_s": 4.8e12,
        "peak_flops_per_s": 989e12,
        "floor_ms": 0.05,
        "dtype": "bfloat16",
        "peak_flops_label": "dense bfloat16 tensor cores",
        "kernels": [
            {"name": "_relu_kernel", "calls_per_forward": 1.0, "us_per_forward": 90.0, "own": True},
            {"name": "void at::native::fill", "calls_per_forward": 1.0, "us_per_forward": 10.0, "own": False},
        ],
        "kernels_omitted": 0,
    }
    text = format_profile(facts)
    assert "device time per forward: 100.0 us (physical floor 50.0 us)" in text
    assert "2400.0 GB/s = 50.0% of peak 4.80 TB/s" in text
    assert "20.00 TFLOP/s = 2.0% of the bfloat16 peak 989 TFLOP/s [dense bfloat16 tensor cores]" in text
    assert "90.0 us  x1   90.0%  _relu_kernel (yours)" in text and "(not yours)" in text


def test_profile_peaks_follow_the_problems_dtype_from_the_anti_hack_table():
    import torch

    from envs.antihack import runtime as guard
    from envs.worker.profiling import compute_dtype

    assert guard.peak_flops("NVIDIA H200", "bfloat16") == (989e12, "dense bfloat16 tensor cores")
    assert guard.peak_flops("NVIDIA H200", "float16")[0] == 989e12
    rate, label = guard.peak_flops("NVIDIA H200", "float32")
    assert rate == 67e12 and "tf32 tensor cores: 495 TFLOP/s" in label
    assert guard.peak_flops("NVIDIA H100 80GB HBM3", "float8_e4m3fn")[0] == 1979e12
    assert guard.peak_flops("NVIDIA A100-SXM4-80GB", "float8_e4m3fn")[0] == 312e12  # no fp8 units: bf16's rate
    assert guard.peak_flops("Some Future GPU", "float32")[0] == guard._FALLBACK_PEAK[1]
    # the floor keeps the dense bf16 rate, whatever the dtype
    assert guard.peak_rates("NVIDIA H200") == (4.8e12, 989e12)
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    assert compute_dtype([x, torch.zeros(8), torch.arange(3)]) == "bfloat16"  # the largest floating input
    assert compute_dtype([torch.arange(3)]) is None
    facts = {
        "device": "NVIDIA H200",
        "calls": 10,
        "device_us_per_forward": 1000.0,
        "min_bytes": 1000,
        "flops": 6.7e12 * 1e-3,
        "peak_bytes_per_s": 4.8e12,
        "floor_ms": 0.001,
        "kernels": [],
        "dtype": "float32",
        "peak_flops_per_s": rate,
        "peak_flops_label": label,
    }
    assert "6.70 TFLOP/s = 10.0% of the float32 peak 67 TFLOP/s [float32 on CUDA cores" in format_profile(facts)
