"""Static reward-hacking analysis of a candidate solution, run before any of its code executes.

`analyze` indexes the module, works out which code runs when `ModelNew.forward` is called, then applies
RULES in order; the first rule that fires gives the finding. Rules for things no kernel needs (exec,
patching torch, the reference Model, subprocess...) scan the whole module, kernel bodies included: they
run at import or under TRITON_INTERPRET=1. Rules about how the output is computed scan only live code
reachable from forward, never @triton.jit bodies. Names resolve to dotted paths through imports and
aliases, so aliasing does not evade a rule. docs/antihack.md ("The static analysis") maps the modules.
"""

from __future__ import annotations

from envs.antihack.static.analysis import _Analysis
from envs.antihack.static.reference import _reference
from envs.antihack.static.rules import RULES
from envs.guard import Budget
from envs.settings import CpuStageLimits
from envs.source import AST_LOCK
from envs.verdict import HackFinding

__all__ = ["RULES", "analyze"]


def analyze(
    solution_source: str, problem_source: str | None = None, limits: CpuStageLimits = CpuStageLimits()
) -> HackFinding | None:
    """The first reward hack found in `solution_source` (canonical code), or None when it looks clean.

    `problem_source`, when given, tells which ops are the problem's main computation (for the reasons, and
    to decide whether copies/casts are allowed). Raises LimitExceeded (envs/guard.py) when the code is
    nested too deeply through its names or takes longer than `limits` allow: a verdict, never a pass."""
    with AST_LOCK:  # the analysis parses both sources
        budget = Budget(limits.max_resolution_depth, limits.analysis_seconds)
        a = _Analysis(solution_source, _reference(problem_source), budget)
        for rule in RULES:
            finding = rule(a)
            if finding is not None:
                return finding
    return None
