"""The non-LLM operator: retune a correct kernel's Triton launch configuration by rewriting constants.

Tunable sites, found in the AST of the parent's code:
  - launch keywords of `kernel[grid](...)` calls: `num_warps=`, `num_stages=`, and block-size keywords
    (names containing BLOCK or TILE, or of the form B_M / BM) given an integer literal;
  - assignments `BLOCK = 4096` / `BLOCK_M: int = 64` of such names to an integer literal (inside functions
    or at module level: the value the launch passes on);
  - a launch without `num_warps` gets a site at Triton's default (4), so it can be tried at 2 and 8.
Each variant changes ONE site to a neighbouring value (warps and block sizes x2 or /2 within 1..16 and
16..8192, stages +-1 within 1..6), so a variant is a small, explainable step; the evaluator measures it like any
candidate, and selection keeps it only if it is faster (or, on CPU, merely correct). Generated code stays
untrusted: the rewrite only replaces literals, and the result is evaluated in full.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from envs.source import SourceError, extract_code

__all__ = ["Site", "Variant", "find_sites", "variants"]

_BLOCK_NAME = re.compile(r"(BLOCK|TILE)|^B_?[MNK]$|^GROUP_SIZE", re.IGNORECASE)
_LIMITS = {"num_warps": (1, 16), "num_stages": (1, 6), "block": (16, 8192)}
_DEFAULT_WARPS = 4


@dataclasses.dataclass(frozen=True)
class Site:
    kind: str  # "keyword" | "assign" | "missing_warps"
    name: str  # num_warps | num_stages | the block constant's name
    value: int
    line: int
    col: int

    @property
    def family(self) -> str:
        return self.name if self.name in ("num_warps", "num_stages") else "block"


@dataclasses.dataclass(frozen=True)
class Variant:
    source: str
    description: str  # e.g. "BLOCK 4096->2048 (line 21)"


def _is_launch(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Subscript)  # kernel[grid](...)


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _tunable_name(name: str) -> bool:
    return name in ("num_warps", "num_stages") or bool(_BLOCK_NAME.search(name))


def find_sites(code: str) -> list[Site]:
    """Every tunable site of `code`, in source order; [] when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return []
    sites: list[Site] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_launch(node):
            names = {k.arg for k in node.keywords}
            for k in node.keywords:
                value = _int_literal(k.value)
                if k.arg and value is not None and value > 0 and _tunable_name(k.arg):
                    sites.append(Site("keyword", k.arg, value, k.value.lineno, k.value.col_offset))
            if "num_warps" not in names:
                sites.append(Site("missing_warps", "num_warps", _DEFAULT_WARPS, node.lineno, node.col_offset))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _int_literal(node.value)
            if (
                value is not None
                and value > 0
                and len(targets) == 1
                and isinstance(targets[0], ast.Name)
                and _BLOCK_NAME.search(targets[0].id)
            ):
                sites.append(Site("assign", targets[0].id, value, node.value.lineno, node.value.col_offset))
    return sorted(sites, key=lambda s: (s.line, s.col, s.name))


def _neighbours(site: Site) -> list[int]:
    low, high = _LIMITS[site.family]
    if site.family == "num_stages":  # software pipelining depth: any small integer, step by one
        steps = (site.value + 1, site.value - 1)
    else:  # warps and block sizes must stay powers of two (tl.arange, the warp scheduler)
        steps = (site.value * 2, site.value // 2)
    return [
        v for v in steps if low <= v <= high and v != site.value and (site.family == "num_stages" or v & (v - 1) == 0)
    ]


class _Rewrite(ast.NodeTransformer):
    def __init__(self, site: Site, value: int):
        self.site, self.value = site, value

    def _matches(self, node: ast.AST) -> bool:
        return getattr(node, "lineno", None) == self.site.line and getattr(node, "col_offset", None) == self.site.col

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if self.site.kind == "missing_warps" and _is_launch(node) and self._matches(node):
            node.keywords.append(ast.keyword("num_warps", ast.Constant(self.value)))
        elif self.site.kind == "keyword" and _is_launch(node):
            for k in node.keywords:
                if k.arg == self.site.name and self._matches(k.value):
                    k.value = ast.Constant(self.value)
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if self.site.kind == "assign" and self._matches(node.value):
            node.value = ast.Constant(self.value)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if self.site.kind == "assign" and node.value is not None and self._matches(node.value):
            node.value = ast.Constant(self.value)
        return node


def variants(text: str) -> list[Variant]:
    """Every one-site neighbour of the answer's launch configuration, in source order ([] if none)."""
    try:
        code = extract_code(text)
    except SourceError:
        return []
    out = []
    for site in find_sites(code):
        for value in _neighbours(site):
            tree = _Rewrite(site, value).visit(ast.parse(code))
            ast.fix_missing_locations(tree)
            added = ", added" if site.kind == "missing_warps" else ""
            shown = f"{site.name} {site.value}->{value} (line {site.line}{added})"
            out.append(Variant(ast.unparse(tree) + "\n", shown))
    return out
