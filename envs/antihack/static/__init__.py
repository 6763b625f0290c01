"""Static reward-hacking analysis of a candidate solution, run before any of its code executes.

`analyze` indexes the module (scopes, imports, aliases, classes, Triton kernels), works out which code
runs when `ModelNew.forward` is called (reachability), then applies RULES in order; the first rule
that fires gives the finding.

- Rules for things no kernel needs (exec, patching torch, writing to stdout or raw file descriptors,
  the reference Model, heap scans, subprocess, threads...) scan the whole module, kernel bodies
  included: module-level code runs at import, and under TRITON_INTERPRET=1 kernel bodies run as
  plain Python. Only `if __name__ == "__main__":` blocks are skipped: the harness imports the
  solution under another name.
- Rules about how the output is computed (PyTorch compute, libraries, fallbacks, side streams) scan
  only live code reachable from forward, and never the bodies of @triton.jit kernels.

Names are resolved to dotted paths ("torch.nn.functional.relu") through imports, module-level and
local aliases, parameter defaults, `self.x = ...` attributes and literal getattr, so aliasing does not
evade a rule. In those paths "()" marks the result of a call and "[]" an element of a container
("torch.nn.Linear()" is an nn.Linear instance), and "?name" a name the module never binds.

Modules, in reading order, each with one job:

- names.py      the name tables (what PyTorch may do outside kernels, what each rule looks for) and
                small dotted-path helpers
- scope.py      `_Scope`: one scope of a module (module, class, function, lambda) and what it binds
- index.py      the index of a module: scopes, bindings, imports and aliases, Triton kernels (`_Index`)
- resolve.py    name resolution: the dotted paths an expression may denote (`quals`; a mixin of `_Index`)
- calls.py      references between functions: what an expression may call into (`refs`; a mixin of `_Index`)
- reach.py      reachability: which code runs when `ModelNew.forward` is called (`_Reachability`)
- tensors.py    tensor-type inference on the forward path (`_Tensors`)
- reference.py  which ops the reference problem's `Model` computes with (`_Reference`)
- analysis.py   `_Analysis`, all of the above for one solution, and the questions rules ask of it
- rules.py      the `rule_*` functions and RULES, their order
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


def analyze(solution_source: str, problem_source: str | None = None,
            limits: CpuStageLimits = CpuStageLimits()) -> HackFinding | None:
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
