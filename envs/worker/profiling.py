"""The `profile` request, inside the worker: where the candidate's device time goes (the `profile` tool).

Runs only in the isolated worker (candidate code never runs in the trainer). The candidate is imported
and built exactly as for an evaluation, called once to compile, then `calls` times under torch.profiler.
Reported per kernel: calls and device time per forward; for the whole forward: device time, achieved
DRAM bandwidth and FLOP/s over the same minimum bytes and FLOPs the anti-hack physical floor uses
(envs/antihack/runtime.py), against the GPU's peak rates from the same table: the bandwidth, and the FLOP/s
of the dtype the problem computes in (its largest floating input's; bf16 989 TFLOP/s dense on an H200). A report, not a verdict: nothing here is a reward.
"""

from __future__ import annotations

from typing import Any

import torch

from envs.antihack import runtime as guard
from envs.compare import as_output_list

_MAX_KERNELS = 12


def _device_time_us(event: Any) -> float:
    t = getattr(event, "self_device_time_total", None)
    if t is None:
        t = getattr(event, "self_cuda_time_total", 0.0)
    return float(t or 0.0)


def compute_dtype(inputs: Any) -> str | None:
    """The dtype the problem computes in: that of its largest floating-point input (None: no floating input)."""
    floats = [v for v in inputs if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not floats:
        return None
    return str(max(floats, key=lambda v: v.numel()).dtype).removeprefix("torch.")


def profile_candidate(evaluation: Any, launches: guard.LaunchRecorder, calls: int = 10) -> dict[str, Any]:
    """Profile `evaluation.candidate` on the problem's inputs (the worker's Evaluation, after
    load_problem and load_candidate; `launches` the worker's launch recorder, which knows the names of the
    candidate's kernels). Returns the facts the parent formats (envs/tools/profile.py)."""
    from torch.profiler import ProfilerActivity, profile

    if evaluation.device.type != "cuda":
        return {"error": "profile needs a GPU"}
    evaluation.link.phase("timing")
    inputs = evaluation._inputs(evaluation.request.timing_seed)
    with torch.no_grad(), evaluation._gpu("exclusive"):
        out = evaluation._run_candidate(lambda: evaluation.candidate(*inputs), "ModelNew.forward (warm-up)")
        own_names = set(launches.names.get(evaluation.solution_module, set()))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                evaluation._run_candidate(lambda: evaluation.candidate(*inputs), "ModelNew.forward (profiled)")
        expected = evaluation._reference(inputs)
        flops = guard.count_flops(lambda: evaluation.model(*inputs))
    kernels = []
    total_us = 0.0
    for event in prof.key_averages():
        t = _device_time_us(event)
        if t <= 0:
            continue
        total_us += t
        kernels.append(
            {
                "name": event.key,
                "calls_per_forward": event.count / calls,
                "us_per_forward": t / calls,
                "own": any(event.key.startswith(n) for n in own_names),
            }
        )
    kernels.sort(key=lambda k: -k["us_per_forward"])
    moved = guard.tensor_bytes(inputs) + guard.tensor_bytes(as_output_list(expected))
    device_name = torch.cuda.get_device_name()
    bandwidth, _ = guard.peak_rates(device_name)
    dtype = compute_dtype(inputs)
    throughput, peak_label = guard.peak_flops(device_name, dtype)
    del out
    return {
        "device": device_name,
        "calls": calls,
        "kernels": kernels[:_MAX_KERNELS],
        "kernels_omitted": max(0, len(kernels) - _MAX_KERNELS),
        "device_us_per_forward": total_us / calls,
        "min_bytes": moved,
        "flops": flops,
        "peak_bytes_per_s": bandwidth,
        "peak_flops_per_s": throughput,
        "dtype": dtype,
        "peak_flops_label": peak_label,
        "floor_ms": guard.floor_ms(moved, flops, device_name),
    }
