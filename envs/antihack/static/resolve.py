"""Name resolution: which dotted paths an expression may denote (`quals`), what it is computed from
(`origins`), the constant strings it may hold (`strings`), and the class behind self/cls/super().

A mixin of `_Index` (index.py), which builds the scopes it reads (`module`, the scopes' bindings,
`_quals` its memo). Separate from building the index because resolution is the question every rule
asks, after the module is indexed; the markers in the paths are described in the package docstring
(envs/antihack/static/__init__.py).
"""

from __future__ import annotations

import ast
import builtins
from typing import Callable

from envs.antihack.static.scope import _Scope


def _fold_str(e: ast.AST) -> str | None:
    """The value of a string built from constants ("comp" + "ile", "".join(["mat", "mul"]), f"{'x'}"), else None."""
    if isinstance(e, ast.Constant):
        return e.value if isinstance(e.value, str) else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = _fold_str(e.left), _fold_str(e.right)
        return None if left is None or right is None else left + right
    if isinstance(e, ast.JoinedStr):
        parts = [_fold_str(v.value if isinstance(v, ast.FormattedValue) else v) for v in e.values]
        return None if None in parts else "".join(parts)
    if (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Attribute)
        and e.func.attr == "join"
        and len(e.args) == 1
        and isinstance(e.args[0], (ast.List, ast.Tuple))
    ):
        sep, parts = _fold_str(e.func.value), [_fold_str(x) for x in e.args[0].elts]
        return None if sep is None or None in parts else sep.join(parts)
    return None


class _Resolver:
    def self_class(self, expr: ast.AST, scope: _Scope) -> _Scope | None:
        """The class when `expr` is the `self` (or `cls`) of an enclosing method."""
        if not isinstance(expr, ast.Name):
            return None
        s = scope
        while s is not None and s.kind == "function":
            if s.self_name == expr.id:
                return s.owner
            if expr.id in s.values or expr.id in s.locals or expr.id in s.defs:
                return None
            s = s.parent
        return None

    def home(self, name: str, scope: _Scope) -> _Scope | None:
        """The innermost scope that binds `name` (by def/class, assignment, import or as a local)."""
        s = scope
        while s is not None:
            if name in s.defs or name in s.values or name in s.imports or name in s.locals:
                return s
            s = s.parent
        return None

    def lookup(self, name: str, scope: _Scope) -> tuple[str, object]:
        """The binding that names `name` first: a def, else assignments, else an import. The analysis is
        flow-insensitive, so `quals` and `refs` also take the home scope's other bindings of the name."""
        s = self.home(name, scope)
        if s is not None:
            if name in s.defs:
                return "scope", s.defs[name]
            if name in s.values:
                return "values", s.values[name]
            if name in s.imports:
                return "path", s.imports[name]
            return "local", None
        if name == "__builtins__":
            return "path", "builtins"
        if hasattr(builtins, name):
            return "path", f"builtins.{name}"
        if self.module.stars:
            return "paths", [f"{m}.{name}" for m in self.module.stars]
        return "path", f"?{name}"

    def quals(self, expr: ast.AST, scope: _Scope) -> set[str]:
        """Dotted paths `expr` may denote (see the module docstring for the markers)."""
        self.budget.enter()
        try:
            return self._quals_of(expr, scope)
        finally:
            self.budget.leave()

    def _quals_of(self, expr: ast.AST, scope: _Scope) -> set[str]:
        if isinstance(expr, ast.Name):
            return self._memo(("name", id(scope), expr.id), lambda: self._name_quals(expr.id, scope))
        if isinstance(expr, ast.Attribute):
            cls, skip = self.member_owner(expr.value, scope)
            if cls is not None:
                return self._memo(
                    ("member", id(cls), expr.attr, skip), lambda: self._member_quals(cls, expr.attr, skip)
                )
            return {f"{q}.{expr.attr}" for q in self.quals(expr.value, scope)}
        if isinstance(expr, ast.Call):
            func = self.quals(expr.func, scope)
            if (
                func & {"builtins.__import__", "importlib.import_module"}
                and expr.args
                and _fold_str(expr.args[0]) is not None
            ):
                return {_fold_str(expr.args[0])}
            out = {q + "()" for q in func}
            for f in self._local_functions(expr.func, scope):  # what the solution's own function returns
                out |= self._memo(
                    ("returns", id(f)),
                    lambda f=f: set().union(
                        *(self.quals(r.value, f) for r in ast.walk(f.node) if isinstance(r, ast.Return) and r.value)
                    ),
                )
            return out
        if isinstance(expr, ast.Subscript):
            base = self.quals(expr.value, scope)
            key = _fold_str(expr.slice)
            if key is not None and base & {"sys.modules", "builtins"}:  # dict-style module lookups
                return {key} if "sys.modules" in base else {f"builtins.{key}"}
            # memoized: an element may be the subscript itself (shape = [shape[0], shape[1]])
            elements = self._memo(
                ("elements", id(expr), id(scope)),
                lambda: set().union(*(self.quals(e, s) for e, s in self._elements(expr.value, scope))),
            )
            return {q + "[]" for q in base} | elements
        if isinstance(expr, ast.IfExp):
            return self.quals(expr.body, scope) | self.quals(expr.orelse, scope)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.quals(v, scope) for v in expr.values))
        if isinstance(expr, ast.NamedExpr):
            return self.quals(expr.value, scope)
        return set()

    def origins(self, expr: ast.AST, scope: _Scope) -> set[str]:
        """Paths of everything `expr` is computed from, through local names (`for m in sys.modules.values()`)."""
        out: set[str] = set()
        todo, seen = [(expr, scope)], set()
        while todo:
            expr, scope = todo.pop()
            for node in ast.walk(expr):
                if isinstance(node, (ast.Name, ast.Attribute)):
                    out |= self.quals(node, scope)
                if isinstance(node, ast.Name):
                    kind, what = self.lookup(node.id, scope)
                    for value, where in what if kind == "values" else []:
                        if id(value) not in seen:
                            seen.add(id(value))
                            todo.append((value, where))
        return out

    def _local_functions(self, expr: ast.AST, scope: _Scope) -> list[_Scope]:
        if isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            if kind == "scope" and what.kind == "function":
                return [what]
        return []

    def strings(self, expr: ast.AST, scope: _Scope) -> set[str]:
        """The constant strings `expr` may hold: a literal, or a name bound to literals or looping over them."""
        folded = _fold_str(expr)
        if folded is not None:
            return {folded}
        if not isinstance(expr, ast.Name):
            return set()
        kind, what = self.lookup(expr.id, scope)
        values = [(v, w) for v, w in what] if kind == "values" else []
        out = {_fold_str(v) for v, _ in values} | {
            _fold_str(e) for v, w in values if isinstance(v, ast.Subscript) for e, _ in self._elements(v.value, w)
        }
        return out - {None}

    def _elements(self, expr: ast.AST, scope: _Scope) -> list[tuple[ast.expr, _Scope]]:
        """The elements of the list/tuple/set/dict literals `expr` may be (ops = [torch.relu]; ops[0](x)),
        through names and attributes bound to them; a worklist, so alias chains cost no stack."""
        out, todo, seen = [], [(expr, scope)], set()
        while todo:
            expr, scope = todo.pop()
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
                out += [(e, scope) for e in expr.elts]
            elif isinstance(expr, ast.Dict):
                out += [(e, scope) for e in expr.values]
            elif isinstance(expr, ast.Name):
                kind, what = self.lookup(expr.id, scope)
                todo += reversed(what) if kind == "values" else []
            elif isinstance(expr, ast.Attribute):
                cls, skip = self.member_owner(expr.value, scope)
                todo += reversed(
                    [v for c in self.mro(cls)[1 if skip else 0 :] for v in c.attrs.get(expr.attr, [])] if cls else []
                )
        return out

    def _memo(self, key: tuple, compute: Callable[[], set[str]]) -> set[str]:
        """compute(), once per key. A question asked again while it is being answered (x = x.view(...))
        gets no paths there, and the answers that saw that gap are not kept: only the outermost answer of a
        cycle is complete, so the others are asked again when they are asked on their own."""
        if key in self._quals:
            return self._quals[key]
        active = self._active
        if key in active:
            self._cycle_floor = min(self._cycle_floor, active[key])
            return set()
        level, outer_floor = len(active), self._cycle_floor
        active[key], self._cycle_floor = level, level + 1
        try:
            result = compute()
        finally:
            del active[key]
        if self._cycle_floor >= level:
            self._quals[key] = result
            self._cycle_floor = outer_floor
        else:
            self._cycle_floor = min(outer_floor, self._cycle_floor)
        return result

    def _name_quals(self, name: str, scope: _Scope) -> set[str]:
        s = self.home(name, scope)
        if s is None:  # a builtin, from a star import, or never bound
            kind, what = self.lookup(name, scope)
            return {what} if kind == "path" else set(what)
        # every binding of the name in its scope: `import torch as t; t = other` may hold either
        out = {s.imports[name]} if name in s.imports else set()
        return out.union(*(self.quals(value, where) for value, where in s.values.get(name, [])))

    def member_owner(self, expr: ast.AST, scope: _Scope) -> tuple[_Scope | None, bool]:
        """(class, skip_it) when `expr` is self/cls (look up from the class) or super() (from its bases)."""
        cls = self.self_class(expr, scope)
        if cls is not None:
            return cls, False
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super":
            s = scope
            while s is not None and s.kind == "function" and s.owner is None:
                s = s.parent
            if s is not None and s.owner is not None:
                return s.owner, True
        if isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            if kind == "scope" and what.kind == "class":
                return what, False
        return None, False

    def mro(self, cls: _Scope) -> list[_Scope]:
        order, todo = [], [cls]
        while todo:
            c = todo.pop(0)
            if c in order:
                continue
            order.append(c)
            for base, where in c.bases:
                if isinstance(base, ast.Name):
                    kind, what = self.lookup(base.id, where)
                    if kind == "scope" and what.kind == "class":
                        todo.append(what)
        return order

    def external_bases(self, cls: _Scope) -> set[str]:
        return {q for c in self.mro(cls) for base, where in c.bases for q in self.quals(base, where)}

    def _member_quals(self, cls: _Scope, attr: str, skip: bool) -> set[str]:
        out, found = set(), False
        for c in self.mro(cls)[1 if skip else 0 :]:
            found = found or attr in c.defs
            for value, where in c.attrs.get(attr, []):
                found = True
                out |= self.quals(value, where)
        if not found:  # inherited from a class outside the module, e.g. nn.Module.register_buffer
            out |= {f"{q}.{attr}" for q in self.external_bases(cls)}
        return out
