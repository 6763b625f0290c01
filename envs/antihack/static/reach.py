"""Reachability: which of the solution's code runs when `ModelNew.forward` is called.

`_Reachability` extends the index of the solution with `model_new` (the ModelNew class), `roots`
(forward, __call__, hooks, class decorators), `reachable` (every function those may call into, to a
fixpoint) and `forward` (the reachable functions that are not Triton kernels: the forward path), and
`live(f)`, the nodes of a function that can run once statically dead branches are left out.
"""

from __future__ import annotations

import ast
import operator

from envs.antihack.static.index import _Index, _Scope
from envs.antihack.static.names import _FORWARD_HOOKS
from envs.guard import Budget

_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}

_UNKNOWN = object()


def _is_size(e: ast.AST) -> bool:
    """x.numel(), x.dim(), x.size(0), x.shape[0], len(x): never negative."""
    if isinstance(e, ast.Call):
        return (
            isinstance(e.func, ast.Attribute)
            and e.func.attr in ("numel", "nelement", "dim", "ndimension", "element_size", "size")
            or isinstance(e.func, ast.Name)
            and e.func.id == "len"
        )
    return isinstance(e, ast.Subscript) and (
        isinstance(e.value, ast.Attribute)
        and e.value.attr == "shape"
        or isinstance(e.value, ast.Call)
        and _is_size(e.value)
    )


class _Reachability(_Index):
    def __init__(self, source: str, budget: Budget | None = None):
        super().__init__(source, budget)
        self._live: dict[int, list[ast.AST]] = {}
        self.model_new = self._find_model_new()
        self.roots = self._roots() if isinstance(self.model_new, _Scope) else set()
        self.reachable = self._reach(self.roots)
        self.forward = [f for f in self.reachable if not f.kernel]  # the forward path, in source order

    def _find_model_new(self) -> _Scope | ast.expr | None:
        kind, what = self.lookup("ModelNew", self.module)
        if kind == "scope" and what.kind == "class":
            return what
        if kind == "values":
            value, where = what[-1]
            if isinstance(value, ast.Name):
                kind2, cls = self.lookup(value.id, where)
                if kind2 == "scope" and cls.kind == "class":
                    return cls
            return value
        return None

    def _roots(self) -> set[_Scope]:
        cls, seen = self.model_new, set()
        roots: set[_Scope] = set()
        for name in ("forward", "__call__", "__getattr__", "__getattribute__"):
            roots |= self.member_refs(cls, name, False, seen)
        for d in cls.node.decorator_list:  # a class decorator may swap forward
            roots |= self.refs(d, cls.parent, seen)
        for c in self.mro(cls):  # hooks run around forward
            for m in c.methods().values():
                for node in ast.walk(m.node):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr in _FORWARD_HOOKS
                    ):
                        for arg in node.args:
                            roots |= self.refs(arg, m, seen)
        return roots

    def _reach(self, roots: set[_Scope]) -> list[_Scope]:
        seen: set[_Scope] = set()
        todo = list(roots)
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            # A decorator may replace the function (a wrapper that does the work), and a kernel's
            # autotune/heuristics hooks run at every launch.
            for d in getattr(f.node, "decorator_list", []):
                todo.extend(self.refs(d, f.outer))
            if f.kernel:
                continue
            for node in self.live(f):
                todo.extend(self.node_refs(node, f, set()))
                if isinstance(node, ast.Call):
                    todo.extend(self.constructors(node, f))
        return sorted(seen, key=lambda s: (s.node.lineno, s.node.col_offset))

    def live(self, f: _Scope) -> list[ast.AST]:
        """The nodes of function `f` that can run: statically dead branches and code after an unconditional
        return/raise/continue/break are left out, and so are nested function and class bodies."""
        if id(f) not in self._live:
            out: list[ast.AST] = []
            if isinstance(f.node, ast.Lambda):
                out.extend(ast.walk(f.node.body))
            else:
                self._live_block(f.node.body, f, out)
            self._live[id(f)] = out
        return self._live[id(f)]

    def _live_block(self, stmts: list[ast.stmt], f: _Scope, out: list[ast.AST]) -> None:
        for s in stmts:
            if isinstance(s, ast.If) and (t := self.truth(s.test, f)) is not None:
                out.extend(ast.walk(s.test))
                self._live_block(s.body if t else s.orelse, f, out)
                continue
            if isinstance(s, ast.While) and self.truth(s.test, f) is False:
                self._live_block(s.orelse, f, out)
                continue
            self._live_stmt(s, f, out)
            if isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                break

    def _live_stmt(self, s: ast.AST, f: _Scope, out: list[ast.AST]) -> None:
        out.append(s)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for expr in (
                s.decorator_list
                + getattr(s, "bases", [])
                + (s.args.defaults + [d for d in s.args.kw_defaults if d] if hasattr(s, "args") else [])
            ):
                out.extend(ast.walk(expr))
            return
        for _, value in ast.iter_fields(s):
            items = value if isinstance(value, list) else [value]
            if items and isinstance(items[0], ast.stmt):
                self._live_block(items, f, out)
                continue
            for item in items:
                if isinstance(item, (ast.excepthandler, ast.match_case)):
                    self._live_stmt(item, f, out)
                elif isinstance(item, ast.AST):
                    out.extend(n for n in ast.walk(item) if not isinstance(n, ast.expr_context))

    def truth(self, e: ast.AST, scope: _Scope):
        """The truth value of a condition known before running (constants, module-level constant flags)."""
        if isinstance(e, ast.Constant):
            return bool(e.value)
        if isinstance(e, ast.Name):
            kind, what = self.lookup(e.id, scope)
            if (
                kind == "values"
                and len(what) == 1
                and isinstance(what[0][0], ast.Constant)
                and what[0][1] is self.module
            ):
                return bool(what[0][0].value)
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            t = self.truth(e.operand, scope)
            return None if t is None else not t
        if isinstance(e, ast.BoolOp):
            values = [self.truth(v, scope) for v in e.values]
            stop = isinstance(e.op, ast.Or)  # True decides an `or`, False an `and`
            if stop in values:
                return stop
            return None if None in values else not stop
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _CMP:
            left, right = self._constant(e.left, scope), self._constant(e.comparators[0], scope)
            # Sizes are never negative: `x.numel() < 0` is false, `x.shape[0] >= 0` true.
            if (
                _is_size(e.left)
                and isinstance(right, (int, float))
                and right <= 0
                and type(e.ops[0]) in (ast.Lt, ast.GtE)
            ):
                return isinstance(e.ops[0], ast.GtE)
            if (
                _is_size(e.comparators[0])
                and isinstance(left, (int, float))
                and left <= 0
                and type(e.ops[0]) in (ast.Gt, ast.LtE)
            ):
                return isinstance(e.ops[0], ast.LtE)
            if left is not _UNKNOWN and right is not _UNKNOWN:
                try:
                    return bool(_CMP[type(e.ops[0])](left, right))
                except TypeError:
                    return None
        return None

    def _constant(self, e: ast.AST, scope: _Scope):
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            kind, what = self.lookup(e.id, scope)
            if (
                kind == "values"
                and len(what) == 1
                and isinstance(what[0][0], ast.Constant)
                and what[0][1] is self.module
            ):
                return what[0][0].value
        return _UNKNOWN
