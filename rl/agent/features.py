"""Simple kernel features for MAP-Elites cells, and a candidate's fitness.

Cells group kernels by the shape of their solution, so that selection keeps different approaches alive
rather than only refinements of the current best: how many @triton.jit kernels it launches (1, 2, 3+),
whether a kernel uses `tl.dot` (a tensor-core GEMM path), whether a kernel loops (a tiled/streaming
reduction rather than one block per row) and whether it is autotuned. Read from the AST, never run.
"""

from __future__ import annotations

import ast

from envs.source import SourceError, extract_code
from envs.verdict import Status, Verdict

__all__ = ["kernel_cell", "fitness", "UNPARSED_CELL"]

UNPARSED_CELL = "unparsed"

# Partial credit of failures, so that mutation prefers near-misses (wrong numbers) over code that never ran.
_FAILURE_CREDIT = {
    Status.INCORRECT: 0.3,
    Status.RUNTIME_ERROR: 0.2,
    Status.TIMEOUT: 0.15,
    Status.COMPILE_ERROR: 0.1,
    Status.CRASH: 0.1,
    Status.HACK: 0.0,
}


def _decorator_names(fn: ast.FunctionDef) -> list[str]:
    names = []
    for d in fn.decorator_list:
        node = d.func if isinstance(d, ast.Call) else d
        names.append(ast.unparse(node))
    return names


def kernel_cell(text: str) -> str:
    """The MAP-Elites cell of an answer, e.g. "k2-dot0-loop1-auto0"; UNPARSED_CELL when it does not parse."""
    try:
        tree = ast.parse(extract_code(text))
    except (SyntaxError, ValueError, RecursionError, SourceError):
        return UNPARSED_CELL
    kernels = [
        f
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef) and any(n.endswith("jit") for n in _decorator_names(f))
    ]
    autotuned = any(any("autotune" in n for n in _decorator_names(f)) for f in kernels)
    dot = loop = False
    for f in kernels:
        for node in ast.walk(f):
            if isinstance(node, (ast.For, ast.While)):
                loop = True
            if isinstance(node, ast.Attribute) and node.attr == "dot":
                dot = True
    count = min(len(kernels), 3)
    return f"k{count}{'+' if len(kernels) > 3 else ''}-dot{int(dot)}-loop{int(loop)}-auto{int(autotuned)}"


def fitness(verdict: Verdict, reward: float) -> float:
    """Higher is better. Correct: the reward plus the measured speedup (reward alone saturates: sigmoid), so
    any correct kernel (>= sigmoid(1 - delta) > 0.3) beats any failure; unmeasured speedup (CPU) adds 0.
    Failures: a small credit by how far they got."""
    if verdict.correct:
        return 1.0 + reward + (verdict.speedup or 0.0)
    return _FAILURE_CREDIT.get(verdict.status, 0.0)
