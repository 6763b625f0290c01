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

# ```python / ```py / ```Python3 ... ``` ; the closing fence may be missing at the end of a truncated answer.
_FENCE = re.compile(r"```[ \t]*(python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


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
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
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


def canonicalize(code: str) -> CanonicalSolution:
    tree = parse(code)
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
    tree = ast.parse(canonical.source)
    node = _module_level_names(tree).get("ModelNew")
    if node is None:
        raise SourceError("the code defines no module-level `class ModelNew`")
    if isinstance(node, ast.ClassDef):
        methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "forward" not in methods and not node.bases:
            raise SourceError("`ModelNew` has no `forward` method and no base class to inherit one from")


def prepare_solution(text: str) -> CanonicalSolution:
    """Extract, canonicalize and check; raises SourceError with an actionable message."""
    code = extract_code(text)
    if not code.strip():
        raise SourceError("the answer holds no code")
    canonical = canonicalize(code)
    check_solution(canonical)
    return canonical
