"""`profile(code)`: where a draft's device time goes, per kernel, against the GPU's peak rates (GPU only).

The candidate runs in an isolated worker (envs/worker/profiling.py through `Evaluator.profile`), never in
this process. Achieved bandwidth and FLOP/s are computed over the minimum bytes (inputs read once, outputs
written once) and the reference's FLOPs, the quantities of the anti-hack physical floor
(envs/antihack/runtime.py), so "% of peak" is the distance from that floor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from envs.tools.base import Tool, ToolContext, ToolResult, string_arguments

NEEDS_GPU = "profile needs a GPU: this run evaluates on the CPU (Triton interpreter), where device time is not measured"


def format_profile(facts: dict[str, Any]) -> str:
    us = facts["device_us_per_forward"]
    seconds = us * 1e-6
    lines = [
        f"profile on {facts['device']} ({facts['calls']} calls of ModelNew.forward under torch.profiler)",
        f"device time per forward: {us:.1f} us (physical floor {1e3 * facts['floor_ms']:.1f} us)",
    ]
    if seconds > 0:
        bandwidth = facts["min_bytes"] / seconds
        flops = facts["flops"] / seconds
        lines.append(
            f"achieved memory bandwidth: {bandwidth / 1e9:.1f} GB/s = "
            f"{100 * bandwidth / facts['peak_bytes_per_s']:.1f}% of peak "
            f"{facts['peak_bytes_per_s'] / 1e12:.2f} TB/s ({facts['min_bytes'] / 1e6:.2f} MB moved at least)"
        )
        if facts["flops"] > 0:
            label = facts.get("peak_flops_label", "dense bf16")
            lines.append(
                f"achieved compute: {flops / 1e12:.2f} TFLOP/s = "
                f"{100 * flops / facts['peak_flops_per_s']:.1f}% "
                f"of the {facts.get('dtype') or 'bf16'} peak {facts['peak_flops_per_s'] / 1e12:.0f} TFLOP/s "
                f"[{label}] ({facts['flops'] / 1e9:.3g} GFLOP)"
            )
    lines.append("kernels (device time per forward, calls per forward, share):")
    for k in facts["kernels"]:
        share = 100 * k["us_per_forward"] / us if us else 0.0
        mark = "yours" if k["own"] else "not yours"
        lines.append(
            f"  {k['us_per_forward']:9.1f} us  x{k['calls_per_forward']:g}  {share:5.1f}%  {k['name'][:90]} ({mark})"
        )
    if facts.get("kernels_omitted"):
        lines.append(f"  ... {facts['kernels_omitted']} smaller kernel(s) omitted")
    return "\n".join(lines)


async def run(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    if context.profiler is None or getattr(context.profiler, "device", "cpu") != "cuda":
        return ToolResult(NEEDS_GPU, ok=False)
    result = await asyncio.to_thread(context.profiler.profile, context.problem, arguments["code"])
    if "error" in result:
        text = result["error"]
        return ToolResult(NEEDS_GPU if text == "profile needs a GPU" else f"profile failed: {text[:1500]}", ok=False)
    return ToolResult(format_profile(result["profile"]), cost={"profiles": 1.0})


TOOL = Tool(
    name="profile",
    description=(
        "Profile a complete solution on the GPU: device time of each kernel per forward call, and the "
        "achieved memory bandwidth and FLOP/s against the GPU's peak. Use it to find the bottleneck "
        "of a correct but slow solution."
    ),
    parameters=string_arguments("code", descriptions={"code": "the full Python source of the solution"}),
    run=run,
    needs_gpu=True,
)
