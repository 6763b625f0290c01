"""From a model's raw text to canonical solution source: extract, canonicalize, basic static checks.

Canonical source (parsed, comments and docstrings dropped, re-printed by `ast.unparse`) is both what
the cache hashes and what the worker runs, so two answers that differ only in comments or
formatting share one verdict.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
import threading

from envs.guard import LimitExceeded
from envs.settings import CpuStageLimits

# ```python / ```py / ```Python3 ... ``` ; the closing fence may be missing at the end of a truncated answer.
_FENCE = re.compile(r"```[ \t]*(python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


# CPython 3.11's ast module is not safe to use from several threads at once (cpython#106905: "AST
# constructor recursion depth mismatch"). Whoever parses or unparses model text in the driver holds it.
AST_LOCK = threading.RLock()


class SourceError(ValueError):
    """The text does not hold a usable solution; the message says why in terms an LLM can act on."""


@dataclasses.dataclass(frozen=True)
class CanonicalSolution:
    source: str  # canonical code
    sha256: str


def extract_code(text: str) -> str:
    """The first fenced python block of `text`, or the whole text when it has none."""
    match = _FENCE.search(text)
    return match.group(2) if match else text


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body.pop(0)
                if not body and not isinstance(node, ast.Module):
                    body.append(ast.Pass())


def parse(code: str, filename: str = "<solution>") -> ast.Module:
    try:
        return ast.parse(code, filename=filename)
    except SyntaxError as e:
        line = (e.text or "").rstrip()
        raise SourceError(f"SyntaxError: {e.msg} (line {e.lineno}){': ' + line.strip() if line else ''}") from None
    except ValueError as e:  # e.g. null bytes
        raise SourceError(f"cannot parse the code: {e}") from None


def check_tree_size(tree: ast.AST, limits: CpuStageLimits) -> None:
    """LimitExceeded when the tree has more nodes or deeper nesting than the analysis is bounded for
    (measured without recursion: the tree may be deep enough to break a recursive walk)."""
    stack, nodes = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > limits.max_ast_nodes:
            raise LimitExceeded(f"the code has over {limits.max_ast_nodes} syntax nodes")
        if depth > limits.max_ast_depth:
            raise LimitExceeded(f"the code nests expressions or blocks over {limits.max_ast_depth} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def canonicalize(code: str, limits: CpuStageLimits = CpuStageLimits()) -> CanonicalSolution:
    if len(code) > limits.max_code_chars:
        raise LimitExceeded(f"the code is over {limits.max_code_chars} characters")
    with AST_LOCK:
        try:
            tree = parse(code)
        except (MemoryError, RecursionError):  # the parser's own stack is exhausted by deep nesting
            raise LimitExceeded("the code nests too deeply for Python's parser") from None
        check_tree_size(tree, limits)
        _drop_docstrings(tree)
        canonical = ast.unparse(tree) + "\n"
    return CanonicalSolution(canonical, hashlib.sha256(canonical.encode()).hexdigest())


def _module_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
    return names


def check_solution(canonical: CanonicalSolution) -> None:
    """Basic structure every solution needs; the anti-hack analysis is separate."""
    with AST_LOCK:
        tree = ast.parse(canonical.source)
    node = _module_level_names(tree).get("ModelNew")
    if node is None:
        raise SourceError("the code defines no module-level `class ModelNew`")
    if isinstance(node, ast.ClassDef):
        methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "forward" not in methods and not node.bases:
            raise SourceError("`ModelNew` has no `forward` method and no base class to inherit one from")


def prepare_solution(text: str, limits: CpuStageLimits = CpuStageLimits()) -> CanonicalSolution:
    """Extract, canonicalize and check; raises SourceError with an actionable message, LimitExceeded for
    text over the CPU stage's bounds."""
    if len(text) > limits.max_answer_chars:
        raise LimitExceeded(f"the answer is over {limits.max_answer_chars} characters")
    code = extract_code(text)
    if not code.strip():
        raise SourceError("the answer holds no code")
    canonical = canonicalize(code, limits)
    check_solution(canonical)
    return canonical
