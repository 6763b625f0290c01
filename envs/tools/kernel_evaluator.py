"""`kernel_evaluator(code)`: the environment's own evaluation of a draft, as feedback (envs/tools/feedback.py).

It goes through the same evaluation pool as the final answer (same static and runtime checks, same timing,
same verdict cache), so a draft that passes here passes as the answer; each call spends one of the
trajectory's evaluations (`ToolContext.evaluations_left`).
"""

from __future__ import annotations

from typing import Any

from envs.tools.base import Tool, ToolContext, ToolResult, string_arguments
from envs.tools.feedback import verdict_feedback


async def run(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    if context.evaluator is None:
        return ToolResult("kernel_evaluator is not available in this run", ok=False)
    if context.evaluations_left <= 0:
        return ToolResult(
            "kernel_evaluator: this trajectory's evaluation budget is spent; submit your answer", ok=False
        )
    context.evaluations_left -= 1
    verdict = await context.evaluator.evaluate_async(context.problem, arguments["code"], priority=context.priority)
    context.verdicts.append(verdict)
    left = f"\n(evaluations left in this trajectory: {context.evaluations_left})"
    reward = context.reward(verdict) if context.reward is not None else None
    return ToolResult(
        verdict_feedback(verdict, reward) + left,
        verdict=verdict,
        cost={"evaluations": 1.0, "evaluation_s": float(verdict.phase_seconds.get("total", 0.0))},
    )


TOOL = Tool(
    name="kernel_evaluator",
    description=(
        "Evaluate a complete solution (Python source defining ModelNew with its Triton kernels) exactly "
        "as the final answer will be evaluated: correctness against the reference on several input "
        "sets, the anti-cheating rules, and on a GPU the speedup against eager PyTorch and "
        "TorchInductor. Returns the status, error lines or output mismatch, and timings. Each call "
        "uses one of a limited number of evaluations."
    ),
    parameters=string_arguments("code", descriptions={"code": "the full Python source of the solution"}),
    run=run,
)
