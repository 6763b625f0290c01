"""A verdict as feedback written for an LLM: what the `kernel_evaluator` tool returns.

What it says: the status; for failures the relevant error lines (the worker already reduces tracebacks to
the solution's own frames) or where and by how much outputs differ; for correct kernels the kernel time,
the speedup against eager PyTorch and against TorchInductor, how close it is to the physical floor (GPU), and
the share of device time in the candidate's own kernels. For a hack: which rule fired (its category and the
category's neutral description, envs/antihack/categories.py), never the detector's detailed reason, which
would describe how to evade it.
"""

from __future__ import annotations

from envs.antihack.categories import CATEGORIES
from envs.compare import format_mismatch
from envs.verdict import Status, Verdict

_MAX_ERROR_CHARS = 1500

_HEADLINES = {
    Status.CORRECT: "correct: outputs match the reference on every input set",
    Status.INCORRECT: "incorrect: the outputs differ from the reference",
    Status.COMPILE_ERROR: "compile_error: the solution did not import or a kernel did not compile",
    Status.RUNTIME_ERROR: "runtime_error: the solution raised while running",
    Status.TIMEOUT: "timeout: the solution did not finish in time",
    Status.CRASH: "crash: the evaluation process died while running the solution",
    Status.HACK: "hack: the solution was rejected by the evaluator's rules",
    Status.REJECTED: "rejected: the solution is too large or too convoluted to analyse",
    Status.INTERNAL_ERROR: "internal_error: the evaluator failed on this solution (not the solution's fault)",
}


def _error_lines(error: str) -> str:
    """The end of an error (where the cause is), at most _MAX_ERROR_CHARS."""
    error = error.strip()
    if len(error) <= _MAX_ERROR_CHARS:
        return error
    return "... (earlier lines omitted)\n" + error[-_MAX_ERROR_CHARS:]


def _ms(stats) -> str:
    return f"{stats.median_ms:.4g} ms"


def verdict_feedback(verdict: Verdict, reward: float | None = None) -> str:
    """What the model reads about its verdict; the `reward` line when the caller computed one (rewards/)."""
    lines = [f"status: {_HEADLINES[verdict.status]}"]
    if verdict.status is Status.HACK:
        category = verdict.hack.category if verdict.hack else "unknown_category"
        lines.append(f"rule: {category} ({CATEGORIES.get(category, 'not an allowed solution')})")
        lines.append("The reward for this solution is 0. Compute the output with your own Triton kernels.")
        return "\n".join(lines)
    if verdict.status is Status.INCORRECT and verdict.mismatch:
        lines.append(f"mismatch: {format_mismatch(verdict.mismatch)}")
    elif verdict.error:
        lines.append("error:\n" + _error_lines(verdict.error))
    if verdict.correct:
        t = verdict.timings
        if t is not None and t.kernel is not None:
            lines.append(f"kernel time: {_ms(t.kernel)} (median of {t.kernel.runs} runs)")
            for name, base in (("eager PyTorch", t.eager), ("TorchInductor", t.inductor)):
                if base is not None and t.kernel.median_ms > 0:
                    lines.append(f"speedup vs {name}: {base.median_ms / t.kernel.median_ms:.3g}x ({_ms(base)})")
        else:
            lines.append("speedup: not measured (evaluated on CPU with the Triton interpreter: correctness only)")
        if verdict.speed_of_light is not None:  # how much faster it could physically get
            lines.append(
                f"physical floor: {verdict.floor_ms:.4g} ms (minimum bytes at peak bandwidth or FLOPs "
                f"at peak); this kernel reaches {100 * verdict.speed_of_light:.0f}% of it"
            )
        if verdict.own_kernel_share is not None:
            lines.append(f"own-kernel share of device time: {100 * verdict.own_kernel_share:.0f}%")
    if reward is not None:
        lines.append(f"reward: {reward:.3f}")
    return "\n".join(lines)
